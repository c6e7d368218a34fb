package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testHTTP2Arm503 is a test-only server of the http2-server child: it
// answers its first request as go-net-http does (so it passes the
// harness's start check) and every later one with 503.
const testHTTP2Arm503 = "test-503-after-first"

// testHTTP2ArmShort is a test-only server of the http2-server child: it
// answers its first request as go-net-http does and every later one with
// status 200 and a body one byte short, its content-length saying so,
// which h2load (nghttp2 checks a body's length against its
// content-length) takes as a good reply.
const testHTTP2ArmShort = "test-short-after-first"

func init() {
	http2Servers[testHTTP2Arm503] = serveAfterFirst(func(w http.ResponseWriter, _ []byte) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	http2Servers[testHTTP2ArmShort] = serveAfterFirst(func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", http2ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)-1))
		w.Write(body[:len(body)-1])
	})
}

// serveAfterFirst is an h2c server that answers its first request as
// go-net-http does, so that it passes the harness's start check, and every
// later one with later.
func serveAfterFirst(later func(w http.ResponseWriter, body []byte)) func(ctx context.Context, addr string, cpus []int, body []byte) error {
	return func(ctx context.Context, addr string, cpus []int, body []byte) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		var n atomic.Int64
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				w.Header().Set("Content-Type", http2ContentType)
				w.Write(body)
				return
			}
			later(w, body)
		}), Protocols: new(http.Protocols)}
		srv.Protocols.SetUnencryptedHTTP2(true)
		go func() { <-ctx.Done(); srv.Close() }()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// needH2load skips the test where h2load is not installed (CI installs it).
func needH2load(t *testing.T) {
	t.Helper()
	skipUnlessLinux(t)
	if _, err := exec.LookPath("h2load"); err != nil {
		t.Skip("h2load is not installed (apt-get install nghttp2-client)")
	}
}

// testHTTP2Config runs this test binary as the http2-server child.
func testHTTP2Config() HTTP2Config {
	argv, env := testChildCommand()
	return HTTP2Config{ServerCommand: argv, Env: append([]string{http2ChildEnv + "=1"}, env[1:]...)}
}

// TestRunHTTP2 runs every arm for one short repetition at 1 and 10
// streams: each arm that is not skipped has a row per streams value with
// a nonzero rate, latencies and server CPU; nginx runs where it is
// installed, spindle-uring where io_uring is enabled, the others always.
func TestRunHTTP2(t *testing.T) {
	needH2load(t)
	cfg := testHTTP2Config()
	cfg.Duration, cfg.Reps, cfg.Conns, cfg.Streams = 2*time.Second, 1, 8, []int{1, 10}
	rep, err := RunHTTP2(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Schema != HTTP2Schema || !strings.HasPrefix(rep.Config.H2load, "h2load nghttp2/") || len(rep.Arms) != len(HTTP2Arms) {
		t.Fatalf("schema %q, h2load %q, arms %+v", rep.Schema, rep.Config.H2load, rep.Arms)
	}
	rows := map[string]int{}
	for _, s := range rep.Summary {
		rows[s.Arm]++
		if s.AchievedRPS.Median <= 0 {
			// A server (under -race, on a busy machine) can be starved
			// for a 0.2 s window: measured alone, with 2 s, it answers.
			t.Logf("%s streams %d: no request in its window; measuring it alone", s.Arm, s.Streams)
			alone := testHTTP2Config()
			alone.Arms, alone.Streams, alone.Duration, alone.Reps, alone.Conns = []string{s.Arm}, []int{s.Streams}, 2*time.Second, 1, 8
			again, err := RunHTTP2(context.Background(), alone)
			if err != nil {
				t.Fatal(err)
			}
			s = again.Summary[0]
		}
		if s.AchievedRPS.Median <= 0 || s.P50.Median <= 0 || s.P999.Median < s.P50.Median {
			t.Errorf("%s streams %d: %+v", s.Arm, s.Streams, s)
		}
	}
	// The CPU figures are there unless the harness, starved on a busy
	// machine, read them off the window, which a note must then say; and
	// they are there for some measurements at least (the reads work).
	measured := 0
	for _, res := range rep.Results {
		if res.Requests > 0 {
			checkCPURoles(t, fmt.Sprintf("%s streams %d rep %d", res.Arm, res.Streams, res.Rep), res.Machine.PerCPU, map[string][]int{"server": rep.Config.ServerCPUs, "client": rep.Config.ClientCPUs})
		}
		// The server's sends run loopback's receive softirq on its CPU,
		// and the timer ticks there: both counts are per request.
		m := res.Machine
		if res.Requests == 0 || res.ServerUSPerReq > 0 && res.ClientCPUPercent > 0 && m.WorkUSPerReq > 0 && m.InterruptsPerReq > 0 && m.NetRxPerReq > 0 {
			if res.Requests > 0 {
				measured++
			}
			continue
		}
		late := fmt.Sprintf("%s streams %d rep %d: the harness read the CPU", res.Arm, res.Streams, res.Rep)
		if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, late) }) {
			t.Errorf("%s streams %d: server %v µs/req, client %v%% CPU, machine work %v µs/req, interrupts %v and NET_RX %v per request on the server's CPUs, and no note that they were read late",
				res.Arm, res.Streams, res.ServerUSPerReq, res.ClientCPUPercent, m.WorkUSPerReq, m.InterruptsPerReq, m.NetRxPerReq)
		}
	}
	if measured == 0 {
		t.Errorf("no measurement has all its CPU figures")
	}
	for _, a := range rep.Arms {
		switch {
		case a.Skipped == "" && rows[a.Name] != 2:
			t.Errorf("%s ran, with %d summary rows, want 2", a.Name, rows[a.Name])
		case a.Skipped == "":
		case a.Name == HTTP2ArmNginx:
			if _, err := exec.LookPath("nginx"); err == nil {
				t.Errorf("nginx is installed but skipped: %s", a.Skipped)
			}
		case a.Name == HTTP2ArmSpindleUring && strings.Contains(a.Skipped, "would fall back"):
			t.Logf("%s skipped: %s", a.Name, a.Skipped) // io_uring disabled here
		default:
			t.Errorf("%s skipped: %s", a.Name, a.Skipped)
		}
	}
	if t.Failed() {
		t.Logf("notes: %q", rep.Notes)
	}
}

// afterFirstArm returns a runner of 4 connections, a 100 ms warm-up and a
// 300 ms window, and the go-net-http arm run as the http2-server child's
// test server name (one of serveAfterFirst's). It skips t without h2load.
func afterFirstArm(t *testing.T, name string) (*http2Runner, http2Arm) {
	t.Helper()
	needH2load(t)
	cfg := testHTTP2Config()
	cfg.Conns = 4
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r := &http2Runner{cfg: cfg, armsRun: armsRun{dir: t.TempDir(), warmup: 100 * time.Millisecond, window: 300 * time.Millisecond}, threads: 1, report: &HTTP2Report{}}
	a := r.arm(HTTP2ArmGoNetHTTP)
	a.name = name
	argv := a.argv
	a.argv = func(dir, listen string) ([]string, error) {
		v, err := argv(dir, listen)
		for i := range v {
			if v[i] == "-arm" {
				v[i+1] = name
			}
		}
		return v, err
	}
	return r, a
}

// TestHTTP2FailsUnverified: a server that answers its start check and then
// 503 fails its measurement, naming the status codes. A window in which
// h2load, starved, did no request is measured again, longer.
func TestHTTP2FailsUnverified(t *testing.T) {
	r, a := afterFirstArm(t, testHTTP2Arm503)
	res, err := r.measure(context.Background(), a, 1, 1)
	for err == nil && res.Requests == 0 && r.window < 2*time.Second {
		// No request done in the window passes verification: h2load was
		// starved on a loaded machine (the whole package under -race).
		r.window *= 4
		t.Logf("no request done in the window: measuring again for %v", r.window)
		res, err = r.measure(context.Background(), a, 1, 1)
	}
	if err == nil || !strings.Contains(err.Error(), "5xx") {
		t.Fatalf("measure = %v (%d requests), want the 503s reported", err, res.Requests)
	}
	var se *startError
	if errors.As(err, &se) {
		t.Fatalf("a start error: %v", err)
	}
}

// TestHTTP2FailsAShortBodyAfterTheLoad: a server whose replies under the
// load are a byte short, with a content-length that matches, passes
// h2load's checks; the reply checked whole after the load fails its
// measurement.
func TestHTTP2FailsAShortBodyAfterTheLoad(t *testing.T) {
	r, a := afterFirstArm(t, testHTTP2ArmShort)
	res, err := r.measure(context.Background(), a, 1, 1)
	if err == nil || !strings.Contains(err.Error(), "after its load") || !strings.Contains(err.Error(), "content-length") {
		t.Fatalf("measure = %v (%d requests), want the short reply after the load reported", err, res.Requests)
	}
}

// TestGoNetHTTP2Server checks the go-net-http server with h2cCheck at
// several body sizes, and that h2cCheck refuses a body of another size.
func TestGoNetHTTP2Server(t *testing.T) {
	for _, size := range []int{0, DefaultHTTP2Body, 100 << 10} {
		addr, stop, ready := startHTTP2Server(t, serveGoNetHTTP2, size)
		if ready != nil {
			t.Errorf("body %d: %v", size, ready)
		}
		if err := h2cCheck(addr, size+1); err == nil {
			t.Errorf("body %d: h2cCheck of %d bytes passed", size, size+1)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeHTTP2MainRefuses checks the child's refusals.
func TestServeHTTP2MainRefuses(t *testing.T) {
	for _, args := range [][]string{{"-arm", "h2o"}, {"-body", "-1"}, {"-cpus", "x"}, {"-listen", "nowhere"}} {
		if err := ServeHTTP2Main(context.Background(), args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// startHTTP2Server starts serve, an arm's server, on a loopback port
// held for it, answering with a body of size bytes, and waits for it to
// answer (waitServing). It returns the address, stop, which ends the
// server and returns serve's error, and the wait's error.
func startHTTP2Server(t *testing.T, serve func(ctx context.Context, addr string, cpus []int, body []byte) error, size int) (addr string, stop func() error, ready error) {
	t.Helper()
	port, err := holdPort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, port.addr, nil, appendBody(nil, size)) }()
	ready = waitServing(port.addr, size)
	port.release()
	return port.addr, func() error { cancel(); return <-done }, ready
}

// waitServing waits up to five seconds for h2cCheck(addr, body) to pass.
func waitServing(addr string, body int) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := h2cCheck(addr, body)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHTTP2ArmsAnswerTheSameFields: the arms served by this binary answer
// with the same header fields (content-type, content-length, and the date
// net/http sends on its own and nginx too), so that none encodes less.
func TestHTTP2ArmsAnswerTheSameFields(t *testing.T) {
	skipUnlessLinux(t)
	want := []string{"Content-Length", "Content-Type", "Date"}
	for _, arm := range []string{HTTP2ArmGoNetHTTP, HTTP2ArmSpindleEpoll} {
		addr, stop, err := startHTTP2Server(t, http2Servers[arm], DefaultHTTP2Body)
		var fields []string
		if err == nil {
			fields, err = h2cFields(addr)
		}
		if serr := stop(); serr != nil {
			t.Fatal(serr)
		}
		if err != nil {
			t.Fatalf("%s: %v", arm, err)
		}
		if !slices.Equal(fields, want) {
			t.Errorf("%s answered the fields %q, want %q", arm, fields, want)
		}
	}
}

// h2cFields is the sorted names of the header fields of addr's reply to
// a GET over h2c; a date field must parse as one.
func h2cFields(addr string) ([]string, error) {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://" + addr + "/")
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if d := resp.Header.Get("Date"); d != "" {
		if at, err := http.ParseTime(d); err != nil || time.Since(at) > time.Minute || time.Until(at) > time.Minute {
			return nil, fmt.Errorf("date %q is not now", d)
		}
	}
	return slices.Sorted(maps.Keys(resp.Header)), nil
}

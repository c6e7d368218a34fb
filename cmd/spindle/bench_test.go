package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mainArgsEnv makes this test binary run main() with the arguments it
// holds (separated by newlines): the spindle binary, for the tests that
// run its two bench halves as separate processes.
const mainArgsEnv = "SPINDLE_TEST_MAIN_ARGS"

// TestHelperMain is not a test: it is the spindle command when started by
// spindleCmd.
func TestHelperMain(t *testing.T) {
	args := os.Getenv(mainArgsEnv)
	if args == "" {
		t.Skip("helper process for the bench server/client tests")
	}
	os.Args = append([]string{"spindle"}, strings.Split(args, "\n")...)
	main()
	os.Exit(0)
}

// spindleCmd returns a command that runs `spindle args...`.
func spindleCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMain$")
	// A race-enabled binary sleeps a second at exit unless told not to.
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args, "\n"),
		strings.TrimSpace("GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return cmd
}

// clientOutput is what `bench client -json` prints.
type clientOutput struct {
	OfferedRPS  float64 `json:"offered_rps"`
	AchievedRPS float64 `json:"achieved_rps"`
	Requests    uint64  `json:"requests"`
	Unanswered  uint64  `json:"unanswered"`
	Latency     struct {
		P50  float64 `json:"p50_us"`
		P99  float64 `json:"p99_us"`
		P999 float64 `json:"p99_9_us"`
		Max  float64 `json:"max_us"`
	} `json:"latency"`
	ClientCPUPercent float64 `json:"client_cpu_percent"`
	SendLagP99US     float64 `json:"send_lag_p99_us"`
}

func runClient(t *testing.T, args ...string) clientOutput {
	t.Helper()
	cmd := spindleCmd(append([]string{"bench", "client", "-json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench client %v: %v\n%s", args, err, stderr.String())
	}
	var co clientOutput
	if err := json.Unmarshal(out, &co); err != nil {
		t.Fatalf("bench client output %q: %v", out, err)
	}
	return co
}

// TestBenchServerClient runs `spindle bench server` and `spindle bench
// client` as two processes, the way they run on two hosts: the client
// drives verified closed- and open-loop load at the server's address, an
// HTTP client gets an answer on the same port, and the server exits cleanly
// on SIGTERM.
func TestBenchServerClient(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("bench server and client are Linux only")
	}
	for _, arm := range []string{"go-net", "uring"} {
		t.Run(arm, func(t *testing.T) {
			srv := spindleCmd("bench", "server", "-arm", arm, "-listen", "127.0.0.1:0")
			var stderr bytes.Buffer
			srv.Stderr = &stderr
			stdout, err := srv.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			defer func() {
				select {
				case <-exited:
				default:
					srv.Process.Kill()
				}
			}()
			hello := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(stdout).ReadString('\n')
				hello <- line
				io.Copy(io.Discard, stdout)
				exited <- srv.Wait()
			}()
			var h struct {
				Addr, Arm string
				Pid       int
			}
			select {
			case line := <-hello:
				if err := json.Unmarshal([]byte(line), &h); err != nil || h.Arm != arm || h.Pid != srv.Process.Pid {
					t.Fatalf("server hello %q (%v); stderr: %s", line, err, stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no hello from the server in 30s; stderr: %s", stderr.String())
			}

			closed := runClient(t, "-addr", h.Addr, "-conns", "8", "-warmup", "50ms", "-duration", "300ms")
			if closed.Requests == 0 || closed.AchievedRPS <= 0 || closed.OfferedRPS != 0 {
				t.Errorf("closed loop: %+v", closed)
			}
			if l := closed.Latency; !(l.P50 > 0 && l.P50 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
				t.Errorf("closed loop percentiles: %+v", l)
			}
			// Open loop: every request of the window is scheduled, sent and
			// answered (rate × window, to rounding).
			const rate, window = 2000.0, 0.4
			open := runClient(t, "-addr", h.Addr, "-conns", "4", "-rate", "2000", "-warmup", "50ms", "-duration", "400ms")
			if want := uint64(rate * window); open.Requests < want-1 || open.Requests > want+1 || open.Unanswered != 0 || open.OfferedRPS != rate {
				t.Errorf("open loop at %v/s for %vs: %d requests (want %d), %d unanswered, offered %v", rate, window, open.Requests, want, open.Unanswered, open.OfferedRPS)
			}
			t.Logf("closed: %.0f req/s p50 %.1fµs; open: %d requests, p99 %.1fµs, send lag p99 %.1fµs",
				closed.AchievedRPS, closed.Latency.P50, open.Requests, open.Latency.P99, open.SendLagP99US)

			// The same port speaks HTTP/1.1.
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + h.Addr + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || len(body) != 128 {
				t.Errorf("HTTP GET: status %d, %d-byte body", resp.StatusCode, len(body))
			}

			if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("server exit after SIGTERM: %v; stderr: %s", err, stderr.String())
				}
			case <-time.After(10 * time.Second):
				t.Errorf("server still running 10s after SIGTERM")
			}
		})
	}

	// A client with nothing to talk to fails, saying why.
	cmd := spindleCmd("bench", "client", "-addr", "127.0.0.1:1", "-duration", "100ms")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "connect") {
		t.Errorf("client against a closed port: err %v, output %q", err, out)
	}
}

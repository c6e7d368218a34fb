package engine

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The echo benchmarks run the server in a child process (this test binary,
// TestHelperEchoServer) with every thread pinned to the last CPU, and the
// clients here pinned to CPU 0, so server CPU per request is measured
// from the child's threads alone (/proc/<pid>/task/*/schedstat).
//
//	go test -run '^$' -bench BenchmarkEcho -benchtime 100000x ./engine/
//
// Arms: every engine backend and "gonet" (Go's net package, a goroutine per
// connection) as the reference.

// benchArms are the servers compared.
var benchArms = append([]string{"gonet"}, func() []string {
	var s []string
	for _, b := range Backends {
		s = append(s, string(b))
	}
	return append(s, string(BackendURing)+batchSuffix)
}()...)

// batchSuffix marks a bench arm that runs its backend with
// Config.BatchWait = benchBatchWait.
const batchSuffix = "-batch"

// benchBatchWait is the batch arms' Config.BatchWait (SPINDLE_BENCH_BATCH_WAIT
// overrides it, for trying other values).
var benchBatchWait = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SPINDLE_BENCH_BATCH_WAIT")); err == nil {
		return d
	}
	return 20 * time.Microsecond
}()

func BenchmarkEcho(b *testing.B) {
	for _, conns := range []int{1, 50, 1000} {
		for _, arm := range benchArms {
			b.Run(fmt.Sprintf("conns=%d/%s", conns, arm), func(b *testing.B) {
				benchEcho(b, arm, conns)
			})
		}
	}
}

// BenchmarkEchoTLS is BenchmarkEcho over TLS 1.3 (the arm's name ends in
// tlsSuffix): Go's net with crypto/tls (tls.NewListener, a goroutine per
// connection) against the engine terminating TLS (ListenConfig.TLS), with
// 64-byte messages on connections whose handshakes are done.
//
//	go test -run '^$' -bench BenchmarkEchoTLS -benchtime 20000x ./engine/
func BenchmarkEchoTLS(b *testing.B) {
	for _, conns := range []int{1, 50} {
		for _, arm := range []string{"gonet", string(BackendURing), string(BackendEpoll)} {
			b.Run(fmt.Sprintf("conns=%d/%s", conns, arm), func(b *testing.B) {
				benchEcho(b, arm+tlsSuffix, conns)
			})
		}
	}
}

// tlsSuffix marks a bench arm serving TLS.
const tlsSuffix = "+tls"

type echoServer struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	addr  string
	pid   int
	pages string
}

// startEchoServer starts the server child; with netns set it runs inside
// that network namespace, listening on listenAddr.
func startEchoServer(b *testing.B, arm, netns, listenAddr string) *echoServer {
	cpu := runtime.NumCPU() - 1
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEchoServer$")
	if netns != "" {
		// ip netns exec execs the binary: the pid stays the server's.
		cmd = exec.Command("ip", "netns", "exec", netns, os.Args[0], "-test.run=^TestHelperEchoServer$")
	}
	cmd.Env = append(os.Environ(), "SPINDLE_BENCH_SERVER="+arm, "SPINDLE_BENCH_CPU="+strconv.Itoa(cpu), "SPINDLE_BENCH_ADDR="+listenAddr)
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s := &echoServer{cmd: cmd, in: in, out: bufio.NewReader(outp), pid: cmd.Process.Pid}
	line, err := s.out.ReadString('\n')
	if err != nil {
		b.Fatalf("server: %v", err)
	}
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "addr" {
		b.Fatalf("server said %q", line)
	}
	s.addr = f[1]
	if len(f) > 2 {
		s.pages = strings.Join(f[2:], " ")
	}
	return s
}

// serverStats is what the server child reports: its engine counters (zero
// for gonet) and the allocations its Go runtime has made.
type serverStats struct {
	Stats
	Mallocs uint64
}

// stats asks the server for its counters.
func (s *echoServer) stats() serverStats {
	var st serverStats
	fmt.Fprintln(s.in, "stats")
	line, _ := s.out.ReadString('\n')
	json.Unmarshal([]byte(line), &st)
	return st
}

func (s *echoServer) stop() {
	s.in.Close()
	s.cmd.Wait()
}

// selfCPUNanos is this process's user and system time, in nanoseconds.
func selfCPUNanos() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// cpuNanos is the CPU time of every thread of process pid.
func cpuNanos(pid int) int64 {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, _ := os.ReadDir(dir)
	var sum int64
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue
		}
		var run int64
		fmt.Sscan(string(b), &run)
		sum += run
	}
	return sum
}

// pinProcess sets the affinity of every thread of this process to cpu and
// returns a function restoring the previous mask.
func pinProcess(cpu int) func() {
	var old unix.CPUSet
	unix.SchedGetaffinity(0, &old)
	set := func(s *unix.CPUSet) {
		ents, _ := os.ReadDir("/proc/self/task")
		for _, e := range ents {
			tid, _ := strconv.Atoi(e.Name())
			unix.SchedSetaffinity(tid, s)
		}
	}
	var one unix.CPUSet
	one.Set(cpu)
	set(&one)
	return func() { set(&old) }
}

func benchEcho(b *testing.B, arm string, nconns int) {
	benchEchoIn(b, arm, nconns, "", "", "127.0.0.1:0")
}

// BenchmarkEchoWire is BenchmarkEcho over the wire topology: server in one
// network namespace, clients in another, joined by a veth pair with GRO on
// and TSO off, so sockets have NAPI ids and busy polling is real.
//
//	go test -run '^$' -bench BenchmarkEchoWire -benchtime 20000x ./engine/
func BenchmarkEchoWire(b *testing.B) {
	nsA, nsB, ip := wireTopology(b)
	for _, conns := range []int{1, 50} {
		for _, arm := range benchArms {
			b.Run(fmt.Sprintf("conns=%d/%s", conns, arm), func(b *testing.B) {
				benchEchoIn(b, arm, conns, nsA, nsB, ip+":0")
			})
		}
	}
}

func benchEchoIn(b *testing.B, arm string, nconns int, nsServer, nsClient, listenAddr string) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs 2 CPUs: server and clients on different ones")
	}
	srv := startEchoServer(b, arm, nsServer, listenAddr)
	defer srv.stop()
	restore := pinProcess(0)
	defer restore()
	conns := make([]net.Conn, nconns)
	dial := func() {
		for i := range conns {
			c, err := net.Dial("tcp", srv.addr)
			if err != nil {
				b.Error(err)
				return
			}
			if strings.HasSuffix(arm, tlsSuffix) {
				// The server's certificate is of its own test CA.
				c = tls.Client(c, &tls.Config{InsecureSkipVerify: true})
			}
			conns[i] = c
		}
	}
	if nsClient != "" {
		inNetns(b, nsClient, dial)
	} else {
		dial()
	}
	for _, c := range conns {
		if c != nil {
			defer c.Close()
		}
	}
	if b.Failed() {
		return
	}
	msg := make([]byte, 64)
	// Warm up every connection.
	for _, c := range conns {
		c.Write(msg)
		io.ReadFull(c, msg)
	}
	b.ReportAllocs()
	st0 := srv.stats()
	cpu0 := cpuNanos(srv.pid)
	self0 := selfCPUNanos()
	b.ResetTimer()
	start := time.Now()
	if nconns == 1 {
		c := conns[0]
		buf := make([]byte, 64)
		for b.Loop() {
			c.Write(msg)
			io.ReadFull(c, buf)
		}
	} else {
		// Closed loop: every connection has one request in flight.
		var next atomic.Int64
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 64)
				for next.Add(1) <= int64(b.N) {
					if _, err := c.Write(buf); err != nil {
						b.Error(err)
						return
					}
					if _, err := io.ReadFull(c, buf); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := cpuNanos(srv.pid) - cpu0
	self := selfCPUNanos() - self0
	st := srv.stats()
	n := float64(b.N)
	b.ReportMetric(n/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(cpu)/1e3/n, "server-µs/req")
	// How much of its CPU each side used: a server below 1 waited for the
	// clients, and its waits per request say how many requests the
	// clients queued per wake-up, not how many it could take.
	b.ReportMetric(float64(cpu)/float64(elapsed), "server-busy")
	b.ReportMetric(float64(self)/float64(elapsed), "client-busy")
	// allocs/op is the client's (this process); the server's are here.
	b.ReportMetric(float64(st.Mallocs-st0.Mallocs)/n, "server-allocs/req")
	if !strings.HasPrefix(arm, "gonet") {
		b.ReportMetric(float64(st.NAPIIDs), "napi-ids")
		b.ReportMetric(float64(st.Waits-st0.Waits)/n, "waits/req")
		b.ReportMetric(float64(st.Submits-st0.Submits)/n, "submits/req")
		b.ReportMetric(float64(st.CQEs-st0.CQEs)/n, "cqes/req")
		b.ReportMetric(float64(st.SQEs-st0.SQEs)/n, "sqes/req")
		b.ReportMetric(float64(st.NoBufs-st0.NoBufs)/n, "nobufs/req")
	}
	if os.Getenv("SPINDLE_BENCH_PROFILE") != "" {
		fmt.Fprintln(srv.in, "profile")
		srv.out.ReadString('\n')
	}
}

// TestHelperEchoServer is the server process of BenchmarkEcho.
func TestHelperEchoServer(t *testing.T) {
	arm := os.Getenv("SPINDLE_BENCH_SERVER")
	if arm == "" {
		t.Skip("helper process for BenchmarkEcho")
	}
	cpu, _ := strconv.Atoi(os.Getenv("SPINDLE_BENCH_CPU"))
	pinProcess(cpu)
	var stats func() Stats
	var addr, pages string
	listenAddr := os.Getenv("SPINDLE_BENCH_ADDR")
	arm, useTLS := strings.CutSuffix(arm, tlsSuffix)
	var lc *ListenConfig
	if useTLS {
		lc = &ListenConfig{TLS: serverTLS()}
	}
	if arm == "gonet" {
		ln, err := net.Listen("tcp", listenAddr)
		if err != nil {
			t.Fatal(err)
		}
		if useTLS {
			ln = tls.NewListener(ln, lc.TLS)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					buf := make([]byte, 4096)
					for {
						n, err := c.Read(buf)
						if n > 0 {
							if _, err := c.Write(buf[:n]); err != nil {
								return
							}
						}
						if err != nil {
							return
						}
					}
				}()
			}
		}()
		addr = ln.Addr().String()
		stats = func() Stats { return Stats{} }
	} else {
		cfg := &Config{Backend: Backend(arm), CPUs: []int{cpu}, Logf: func(string, ...any) {}}
		if b, ok := strings.CutSuffix(arm, batchSuffix); ok {
			cfg.Backend, cfg.BatchWait = Backend(b), benchBatchWait
		}
		e := newEngine(t, cfg, &echoHandler{zeroCopy: true})
		ln, err := e.Listen("tcp", listenAddr, lc)
		if err != nil {
			t.Fatal(err)
		}
		go e.Run(context.Background())
		addr = ln.Addr().String()
		stats = e.Stats
		for e.BufferPages() == "" {
			time.Sleep(time.Millisecond)
		}
		pages = e.BufferPages()
	}
	fmt.Println("addr", addr, pages)
	if p := os.Getenv("SPINDLE_BENCH_PROFILE"); p != "" {
		f, _ := os.Create(p + "." + arm)
		pprof.StartCPUProfile(f)
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "profile" {
			pprof.StopCPUProfile()
			fmt.Println("{}")
			continue
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		j, _ := json.Marshal(serverStats{stats(), ms.Mallocs})
		fmt.Println(string(j))
	}
	os.Exit(0)
}

// BenchmarkLoopWake measures the uring loop's own cost per wake-up, which
// whole-server runs cannot resolve to a per cent: the loop's thread CPU
// (CLOCK_THREAD_CPUTIME_ID, read on the loop) per iteration, user time
// (RUSAGE_THREAD) and allocations.
//
//	go test -run '^$' -bench BenchmarkLoopWake -benchtime 200000x -count 10 ./engine/
//
// Its arms:
//
//   - msgring: one cheap completion per iteration and nothing else. A posted
//     function posts itself again through PostTo, which queues it and
//     prepares an IORING_OP_MSG_RING to the loop's own ring: each iteration
//     runs the posted function (runPosts), submits the message in its
//     io_uring_enter, reaps its two completions (the message and its
//     sender's) and handles them, through serve, poll and handle as any
//     wake-up does; the kernel's part is a message posted to a ring.
//     The wait does not sleep (a posted function is pending, as under
//     load a reply to send is).
//
//   - echo: one 64-byte echo per iteration over loopback TCP, a client on
//     another CPU with one request in flight (open load's one request per
//     wake-up): the loop sleeps and wakes each time.
func BenchmarkLoopWake(b *testing.B) {
	b.Run("msgring/"+string(BackendURing), func(b *testing.B) {
		if err := uringUsable(); err != nil {
			b.Skipf("io_uring unavailable: %v", err)
		}
		e := newEngine(b, &Config{Backend: BackendURing, CPUs: []int{runtime.NumCPU() - 1}, Logf: testLogf}, &echoHandler{})
		runEngine(b, e)
		l := e.Loops()[0]
		var n, want int
		done := make(chan struct{})
		var f func()
		f = func() {
			if n++; n < want {
				l.PostTo(l, f)
				return
			}
			done <- struct{}{}
		}
		start := func() { l.PostTo(l, f) }
		round := func(iters int) {
			n, want = 0, iters
			l.Post(start)
			<-done
		}
		round(1000) // the post queues and the CQ batch at their size
		if l.Stats().MsgRings == 0 {
			b.Skipf("the loop runs %s (its ring refused): no MSG_RING to measure", e.Backend())
		}
		benchLoop(b, l, func() { round(b.N) })
		if st := l.Stats(); st.MsgRingErrs != 0 {
			b.Fatalf("%d MSG_RING wake-ups failed", st.MsgRingErrs)
		}
	})
	for _, be := range []Backend{BackendURing, BackendEpoll} {
		b.Run("echo/"+string(be), func(b *testing.B) {
			if runtime.NumCPU() < 2 {
				b.Skip("needs 2 CPUs: the loop and the client on different ones")
			}
			if be == BackendURing {
				if err := uringUsable(); err != nil {
					b.Skipf("io_uring unavailable: %v", err)
				}
			}
			e, addr := startEngine(b, &Config{Backend: be, CPUs: []int{runtime.NumCPU() - 1}, Logf: testLogf}, &echoHandler{zeroCopy: true})
			l := e.Loops()[0]
			c := mustDial(b, "tcp", addr)
			// The client's thread on CPU 0, the rest of the process
			// where it was.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var old, one unix.CPUSet
			unix.SchedGetaffinity(0, &old)
			one.Set(0)
			unix.SchedSetaffinity(0, &one)
			defer unix.SchedSetaffinity(0, &old)
			msg := make([]byte, 64)
			round := func(iters int) {
				for range iters {
					if err := roundTrip(c, msg); err != nil {
						b.Fatal(err)
					}
				}
			}
			round(1000)
			benchLoop(b, l, func() { round(b.N) })
		})
	}
}

// benchLoop runs b.N iterations of loop l (run) and reports the loop
// thread's CPU and user time per iteration, its wait system calls and
// completions per iteration, and the process's allocations, of which it
// allows none beyond a few from the runtime (under one per 100
// iterations, with 1,000 or more). The CPU time is exact; the user time
// is the kernel's split of it by where the scheduler's ticks found the
// thread (250 a second on the test VM), a few per cent at best over a
// second's run.
func benchLoop(b *testing.B, l *Loop, run func()) {
	cpu0, user0 := loopThreadCPU(l)
	st0 := l.Stats()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ReportAllocs()
	b.ResetTimer()
	run()
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	st := l.Stats()
	cpu1, user1 := loopThreadCPU(l)
	n := float64(b.N)
	b.ReportMetric(float64(cpu1-cpu0)/n, "loop-ns/op")
	b.ReportMetric(float64(user1-user0)/n, "loop-user-ns/op")
	b.ReportMetric(float64(st.Waits-st0.Waits)/n, "waits/op")
	b.ReportMetric(float64(st.CQEs-st0.CQEs)/n, "cqes/op")
	allocs := m1.Mallocs - m0.Mallocs
	if b.N >= 1000 && allocs*100 > uint64(b.N) {
		b.Errorf("%d allocations in %d iterations, want 0 (under 0.01 each allowed for the runtime)", allocs, b.N)
	}
}

// loopThreadCPU returns the CPU time and the user time of l's thread, in
// nanoseconds, read on the loop.
func loopThreadCPU(l *Loop) (cpu, user int64) {
	done := make(chan struct{})
	l.Post(func() {
		cpu = threadCPU()
		var ru unix.Rusage
		unix.Getrusage(unix.RUSAGE_THREAD, &ru)
		user = ru.Utime.Nano()
		close(done)
	})
	<-done
	return cpu, user
}

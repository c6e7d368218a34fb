package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spindlenet/spindle/internal/cpulist"
)

// ServerUsage is a server process's resource use since it started, as the
// server child reports it.
type ServerUsage struct {
	// UserNS and SysNS are the process's user and system CPU time
	// (getrusage RUSAGE_SELF), in ns.
	UserNS int64 `json:"user_ns"`
	SysNS  int64 `json:"sys_ns"`
	// Nvcsw and Nivcsw are voluntary and involuntary context switches.
	Nvcsw  int64 `json:"nvcsw"`
	Nivcsw int64 `json:"nivcsw"`
	// Threads is per-thread accounting from /proc/self/task.
	Threads []TaskStat `json:"threads"`
	// Counters are the arm's own counters, when it has any (the spindle
	// engine's "waits": io_uring_enter or epoll_wait calls, "submits", …),
	// read with the rusage, at MonoNS.
	Counters map[string]uint64 `json:"counters,omitempty"`
	// MonoNS is CLOCK_MONOTONIC, in ns, when the child read its rusage:
	// the harness divides the CPU between two answers by the time between
	// them, however late a busy child answered. 0 from a child that does
	// not send it; the harness then uses the answers' arrival times.
	MonoNS int64 `json:"mono_ns,omitempty"`
}

// counterer is implemented by servers that count their kernel waits.
type counterer interface {
	Counters() map[string]uint64
}

// selfCheck sends one RPC request to addr and verifies the echo, so that a
// server child reports ready only once it serves correctly.
func selfCheck(addr string) error {
	return echoCheck(addr, rpcFraming{payload: MinPayload})
}

// childHello is the first line a server child writes.
type childHello struct {
	Addr string `json:"addr"`
	Pid  int    `json:"pid"`
	Arm  string `json:"arm"`
	// Note is what the server says about its setup, for the report (the
	// c-liburing server's io_uring setup flags); Go children send none.
	Note string `json:"note,omitempty"`
}

// ParseCPUList parses a CPU list such as "0", "0,2" or "0-3,6" into sorted,
// distinct CPU numbers (the kernel's list format). Any goroutine.
func ParseCPUList(s string) ([]int, error) {
	cpus, err := cpulist.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return cpus, nil
}

// FormatCPUList formats CPUs as a comma-separated list.
func FormatCPUList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// pinCPUList parses a server child's -cpus list and pins the process to
// it; an empty list leaves the process unpinned. A list that does not
// parse is a UsageError; one this host refuses (a CPU not online, outside
// the cpuset) is not.
func pinCPUList(s string) ([]int, error) {
	cpus, err := ParseCPUList(s)
	if err != nil {
		return nil, &UsageError{Err: fmt.Errorf("-cpus: %w", err)}
	}
	if len(cpus) > 0 {
		err = pinProcess(cpus)
	}
	return cpus, err
}

// UsageError is a command line that ServeMain or ServeHTTP2Main cannot run
// as given, on any host: a flag that does not parse, an argument after the
// flags, a value outside a flag's range or list. The caller says it once
// (it has not been printed) and exits with status 2, 1 being for a server
// that failed or a host that refused it (a CPU not online).
type UsageError struct {
	Err error
	// UsagePrinted is true when the flags' usage was printed on stderr
	// before the error was returned, as for a command line that does not
	// parse.
	UsagePrinted bool
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// parseServeFlags parses a server child's flags from args: a command line
// that does not parse, or that leaves an argument after the flags, prints
// the usage on stderr and is a UsageError, the error itself left to the
// caller to say once (the flag package would print it too). -h prints the
// usage and returns flag.ErrHelp.
func parseServeFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(os.Stderr)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q: this command takes only flags", fs.Arg(0))
	}
	if err == nil {
		return nil
	}
	fs.Usage()
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &UsageError{Err: err, UsagePrinted: true}
}

// ServeMain is the server half: `spindle bench server` and the peers
// binary call it with their command-line arguments. It pins the process,
// starts the arm, prints one JSON line {"addr","pid","arm"} on stdout and
// serves until ctx is done. With -control it also answers "usage" lines on
// stdin with a ServerUsage JSON line, and returns at EOF on stdin. A
// command line it cannot run is a UsageError; -h prints the usage and
// returns flag.ErrHelp.
func ServeMain(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench server", flag.ContinueOnError)
	armName := fs.String("arm", "go-net", "server arm (go-net, gnet, or a spindle engine backend)")
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	loops := fs.Int("loops", 1, "event loops (GOMAXPROCS for go-net)")
	cpus := fs.String("cpus", "", "pin the server process to these CPUs (e.g. 0 or 0-1)")
	spare := fs.String("spare-cpus", "", "CPUs for the arm's helper threads (SQPOLL), outside -cpus")
	compute := fs.Int("compute-us", 0, "µs spun per request before replying, on the wall clock (CLOCK_MONOTONIC, not the thread's CPU time: an interrupt, softirq or preemption meanwhile is inside them, not added)")
	body := fs.Int("body", DefaultPayload, "HTTP response body size for requests without a body")
	control := fs.Bool("control", false, "harness mode: answer 'usage' on stdin, exit at EOF (or when stopped)")
	if err := parseServeFlags(fs, args); err != nil {
		return err
	}
	arm, err := LookupArm(*armName)
	if err != nil {
		return &UsageError{Err: fmt.Errorf("-arm: %w", err)}
	}
	if arm.Start == nil && arm.Program != nil {
		return &UsageError{Err: fmt.Errorf("bench: arm %q is a program of its own, built and started by the harness (`spindle bench --arms %s`), not served by this binary", arm.Name, arm.Name)}
	}
	if arm.Start == nil {
		return &UsageError{Err: fmt.Errorf("bench: arm %q is served by the peers binary (bench/peers), not this one", arm.Name)}
	}
	// Both lists are parsed before the process is pinned, so that a
	// -spare-cpus that does not parse is said before a -cpus this host
	// refuses.
	spareList, err := ParseCPUList(*spare)
	if err != nil {
		return &UsageError{Err: fmt.Errorf("-spare-cpus: %w", err)}
	}
	cpuList, err := pinCPUList(*cpus)
	if err != nil {
		return err
	}
	runtime.GOMAXPROCS(max(*loops, 1))
	srv, err := arm.Start(ctx, ServerConfig{
		Addr: *listen, Loops: *loops, CPUs: cpuList, SpareCPUs: spareList,
		Compute: time.Duration(*compute) * time.Microsecond, BodySize: *body,
	})
	if err != nil {
		return fmt.Errorf("bench: start %s: %w", arm.Name, err)
	}
	defer srv.Close()
	if err := selfCheck(srv.Addr().String()); err != nil {
		return fmt.Errorf("bench: %s does not serve correctly: %w", arm.Name, err)
	}
	hello, _ := json.Marshal(childHello{Addr: srv.Addr().String(), Pid: os.Getpid(), Arm: arm.Name})
	if _, err := fmt.Fprintf(stdout, "%s\n", hello); err != nil {
		return err
	}
	if !*control {
		<-ctx.Done()
		return nil
	}
	// The control loop reads stdin on a goroutine of its own, so that ctx
	// (the binaries' SIGINT and SIGTERM) ends the server even while no
	// control line comes.
	done := make(chan error, 1)
	go func() { done <- answerControl(srv, stdin, stdout) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	}
}

// usageAnswered, when set (by tests, in a server child), runs after the
// child's n-th usage answer, before the next control line is read; an
// error ends the control loop.
var usageAnswered func(n int) error

// answerControl answers the control lines on stdin until EOF.
func answerControl(srv Server, stdin io.Reader, stdout io.Writer) error {
	sc := bufio.NewScanner(stdin)
	enc := json.NewEncoder(stdout)
	answered := 0
	for sc.Scan() {
		switch sc.Text() {
		case "usage":
			var counters func() map[string]uint64
			if c, ok := srv.(counterer); ok {
				counters = c.Counters
			}
			u, err := selfUsage(counters)
			if err != nil {
				return err
			}
			if err := enc.Encode(u); err != nil {
				return err
			}
			answered++
			if usageAnswered != nil {
				if err := usageAnswered(answered); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("bench server: unknown control command %q", sc.Text())
		}
	}
	return sc.Err()
}

// defaultUsageTimeout bounds the wait for a child's usage answer, the
// time it was runnable not counted (usage): a busy child answers in
// milliseconds, a stuck one never.
const defaultUsageTimeout = 5 * time.Second

// serverProc is a running server child, seen from the harness. Its methods
// are called from one goroutine at a time.
type serverProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	// outPipe is out's pipe, for what the child wrote that the harness
	// has yet to read (await).
	outPipe *os.File
	hello   childHello
	errb    *lockedBuffer
	// usageTimeout bounds usage; defaultUsageTimeout.
	usageTimeout time.Duration
	// stuck is set once a usage request went unanswered: the control
	// pipe's reader still waits for that answer, so later ones fail.
	stuck bool
}

// lockedBuffer collects the child's stderr. exec copies into it from its own
// goroutine until Wait returns, while the harness may read it earlier (a
// failed usage request), so access is locked.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// defaultHelloTimeout bounds the wait for a server child's hello line,
// the time it was runnable not counted (serverProc.await): a child starved
// on a loaded machine, waiting for a CPU, is slow to start, not broken.
const defaultHelloTimeout = 30 * time.Second

// startServerProc starts argv (a server child in -control mode) and waits
// for its hello line (defaultHelloTimeout).
func startServerProc(ctx context.Context, argv, env []string) (*serverProc, error) {
	return startServerProcWithin(ctx, argv, env, defaultHelloTimeout)
}

// startServerProcWithin is startServerProc with the hello's timeout.
func startServerProcWithin(ctx context.Context, argv, env []string, timeout time.Duration) (*serverProc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &serverProc{cmd: cmd, in: in, out: bufio.NewReader(outp), errb: &lockedBuffer{}, usageTimeout: defaultUsageTimeout}
	p.outPipe, _ = outp.(*os.File)
	cmd.Stderr = p.errb
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start server %v: %w", argv, err)
	}
	got := make(chan line, 1)
	go func() {
		b, err := p.out.ReadBytes('\n')
		got <- line{b, err}
	}()
	l, w, ok := p.await(ctx.Done(), got, timeout)
	switch {
	case ok && l.err == nil:
		err = json.Unmarshal(l.b, &p.hello)
	case ok:
		err = l.err
	case ctx.Err() != nil:
		err = ctx.Err()
	default:
		err = fmt.Errorf("no hello (the wait ends after %v of the child's not being runnable, or %v in all): %s", timeout, usageHang, p.waited(w))
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("bench: server %v: %v: %s", argv, err, strings.TrimSpace(p.errb.String()))
	}
	return p, nil
}

// line is a line read from a child's stdout, or the error that ended the
// read.
type line struct {
	b   []byte
	err error
}

// wait is what serverProc.await saw of the child while it waited.
type wait struct {
	// total is the time waited, runnable the part of it during which a
	// thread of the child was runnable (running or waiting for a CPU),
	// unread the part during which none was but what it wrote waited in
	// the pipe for the harness (starved itself).
	total, runnable, unread time.Duration
}

// asleep is the part of the wait the child could have answered in and
// did not: neither runnable nor with its output unread.
func (w wait) asleep() time.Duration { return w.total - w.runnable - w.unread }

// await waits for got until the child has been able to answer for
// timeout: the time counts only while none of its threads is runnable
// (each look at their states, every tenth of the timeout, counts the time
// since the one before) and nothing it wrote waits in the pipe for the
// harness's reader, and a child runnable for usageHang without answering
// is stuck too. It returns the line and true, or false when the wait
// ended unanswered, timed out or done closed (nil: never).
//
// The child's answer written and the harness's own goroutines starved
// (the test of a starved child spins a thread beside it; a loaded CI
// host), a look found the child asleep again and counted the time since
// the one before against it: "no answer within 1.54s" where the answer
// sat in the pipe (TestAwaitAnswerUnread).
func (p *serverProc) await(done <-chan struct{}, got <-chan line, timeout time.Duration) (line, wait, bool) {
	start := time.Now()
	look := time.NewTicker(max(timeout/10, time.Millisecond))
	defer look.Stop()
	var w wait
	for last := start; w.asleep() < timeout && w.total < usageHang; {
		select {
		case l := <-got:
			return l, w, true
		case <-done:
			return line{}, w, false
		case now := <-look.C:
			switch {
			case p.runnable():
				w.runnable += now.Sub(last)
			case pipeUnread(p.outPipe) > 0:
				w.unread += now.Sub(last)
			}
			w.total = now.Sub(start)
			last = now
		}
	}
	select {
	case l := <-got:
		return l, w, true
	default:
	}
	return line{}, w, false
}

// waited says how a wait that ended unanswered went, for the error: how
// long the child was runnable (starved of CPU, or spinning) and asleep,
// the CPU time it used, and its threads' states now.
func (p *serverProc) waited(w wait) string {
	s := fmt.Sprintf("waited %v, the child runnable (running or waiting for a CPU) for %v of it and not runnable for the rest",
		w.total.Round(time.Millisecond), w.runnable.Round(time.Millisecond))
	if w.unread > 0 {
		s += fmt.Sprintf(", %v of which with its output unread by the harness", w.unread.Round(time.Millisecond))
	}
	tasks, err := Proc{}.Tasks(p.cmd.Process.Pid)
	if err != nil {
		return s + fmt.Sprintf("; its threads: %v", err)
	}
	var run time.Duration
	states := map[byte]int{}
	for _, t := range tasks {
		run += time.Duration(t.RunNS)
		states[t.State]++
	}
	var now []string
	for _, st := range slices.Sorted(maps.Keys(states)) {
		now = append(now, fmt.Sprintf("%d %c", states[st], st))
	}
	return s + fmt.Sprintf("; it ran %v on a CPU; its threads now: %s (R runnable, S asleep, D in the kernel uninterruptibly)",
		run.Round(time.Microsecond), strings.Join(now, ", "))
}

// usage asks the child for its resource use and waits for the answer
// until the child has been able to answer for p.usageTimeout: the time
// counts only while none of its threads is runnable (each look at their
// states, every tenth of the timeout, counts the time since the one
// before). A child starved on a loaded machine, waiting for a CPU, is
// slow, not stuck, and its late answer is noted (lateReadsNote); one
// asleep without answering is stuck, an error, and so is one runnable
// for usageHang without answering.
func (p *serverProc) usage() (ServerUsage, error) {
	var u ServerUsage
	if p.stuck {
		return u, errors.New("bench: server usage: the child left an earlier request unanswered")
	}
	if _, err := io.WriteString(p.in, "usage\n"); err != nil {
		return u, fmt.Errorf("bench: server usage: %w", err)
	}
	// The read ends when the child answers or exits (stop closes the
	// pipe once it has).
	got := make(chan line, 1)
	go func() {
		b, err := p.out.ReadBytes('\n')
		got <- line{b, err}
	}()
	l, w, ok := p.await(nil, got, p.usageTimeout)
	if !ok {
		p.stuck = true
		return u, fmt.Errorf("bench: server usage: no answer within %v (%s): %s", w.total.Round(time.Millisecond), p.waited(w), strings.TrimSpace(p.errb.String()))
	}
	if l.err != nil {
		return u, fmt.Errorf("bench: server usage: %w: %s", l.err, strings.TrimSpace(p.errb.String()))
	}
	return u, json.Unmarshal(l.b, &u)
}

// usageHang bounds the wait for a usage answer or a hello of a child
// that stays runnable: spinning, or starved for that long.
const usageHang = time.Minute

// runnable reports whether one of the child's threads is running or
// waiting for a CPU (state R), or its threads cannot be read.
func (p *serverProc) runnable() bool {
	tasks, err := Proc{}.Tasks(p.cmd.Process.Pid)
	return err != nil || slices.ContainsFunc(tasks, func(t TaskStat) bool { return t.State == 'R' })
}

// stop closes the child's stdin and waits for it to exit, killing it after
// five seconds.
func (p *serverProc) stop() error {
	p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("bench: server exit: %w: %s", err, strings.TrimSpace(p.errb.String()))
		}
		return nil
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
		return errors.New("bench: server did not exit within 5s; killed")
	}
}

// pinnedRun runs f with every thread of the harness on cpus (pinHarness)
// and gives them their CPUs back after it: the runs of `spindle bench
// http2` and `bench proxy`. Failing to pin fails the run before f; failing
// to give the CPUs back is a warning on progress, the run being done.
func pinnedRun(cpus []int, progress io.Writer, f func() error) error {
	unpin, err := pinHarness(cpus)
	if err != nil {
		return err
	}
	err = f()
	if uerr := unpin(); uerr != nil {
		fmt.Fprintf(progress, "warning: %v\n", uerr)
	}
	return err
}

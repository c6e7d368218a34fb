package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// The spindle engine arms: one per engine backend. This is the
// registration point for arms built on package engine.
func init() {
	summaries := map[engine.Backend]string{
		engine.BackendEpoll:         "spindle engine, epoll backend: pinned per-core loops, level-triggered epoll, read/write syscalls; echoes the received buffer without a copy",
		engine.BackendEpollBusyPoll: "spindle engine, epoll with per-instance busy polling (EPIOCSPARAMS, 50 µs)",
		engine.BackendURing:         "spindle engine, io_uring: SINGLE_ISSUER|DEFER_TASKRUN, multishot accept and recv on a buffer ring, one io_uring_enter per iteration",
		engine.BackendURingSQPoll:   "spindle engine, io_uring with an SQPOLL kernel thread on a CPU outside the loop set",
		engine.BackendURingNAPI:     "spindle engine, io_uring with IORING_REGISTER_NAPI busy polling (50 µs)",
	}
	order := map[engine.Backend]int{
		engine.BackendEpoll: 20, engine.BackendEpollBusyPoll: 21, engine.BackendURing: 22,
		engine.BackendURingSQPoll: 23, engine.BackendURingNAPI: 24,
	}
	for _, b := range engine.Backends {
		RegisterArm(Arm{
			Name:          string(b),
			Summary:       summaries[b],
			Start:         func(ctx context.Context, cfg ServerConfig) (Server, error) { return startEngine(ctx, b, 0, cfg) },
			Order:         order[b],
			NeedsSpareCPU: b == engine.BackendURingSQPoll,
		})
	}
	RegisterArm(Arm{
		Name:    "uring-batch",
		Summary: fmt.Sprintf("spindle engine, io_uring with Config.BatchWait %v: a busy loop's wait asks for twice its last iteration's completions, no more receives than its ring has buffers free, and returns once %[1]v has passed with one there", batchArmWait),
		Start: func(ctx context.Context, cfg ServerConfig) (Server, error) {
			return startEngine(ctx, engine.BackendURing, batchArmWait, cfg)
		},
		Order: 25,
		OptIn: true,
	})
}

// engineBatchWait is the engine's; tests replace it to run the path of
// kernels without IORING_FEAT_MIN_TIMEOUT (before 6.12).
var engineBatchWait = (*engine.Engine).BatchWait

// batchArmWait is the uring-batch arm's Config.BatchWait.
const batchArmWait = 50 * time.Microsecond

// engineServer is a spindle engine serving the echo protocols.
type engineServer struct {
	e      *engine.Engine
	ln     *engine.Listener
	cancel context.CancelFunc
	done   chan error
}

// engineConn is one connection's protocol state, owned by its loop.
type engineConn struct {
	echo Echo
	in   []byte // an incomplete request carried to the next read
	out  []byte
}

// engineEcho is the Handler; its callbacks run on the loop goroutines.
type engineEcho struct {
	engine.BaseHandler
	cfg ServerConfig
}

// OnOpen attaches the protocol state. Loop goroutine.
func (h *engineEcho) OnOpen(c *engine.Conn) {
	c.SetContext(&engineConn{echo: Echo{Compute: h.cfg.Compute, BodySize: h.cfg.BodySize}})
}

// OnData answers the complete requests in b and keeps a partial one. A
// buffer of whole RPC requests is sent back as it is (Conn.WriteBuffer, no
// copy); anything else is parsed and copied. Loop goroutine.
func (h *engineEcho) OnData(c *engine.Conn, b engine.Buffer) bool {
	st := c.Context().(*engineConn)
	data := b.Bytes()
	if len(st.in) == 0 {
		// The common case: the buffer holds whole requests. Their echo is
		// the buffer itself, sent without a copy.
		if reqs, ok := st.echo.WholeRPC(data); ok {
			for range reqs {
				Spin(st.echo.Compute)
			}
			if err := c.WriteBuffer(b); err != nil {
				c.Close()
			}
			return true
		}
	}
	if len(st.in) > 0 {
		st.in = append(st.in, data...)
		data = st.in
	}
	n, out, err := st.echo.Process(data, st.out[:0])
	st.out = out
	if len(out) > 0 {
		if _, werr := c.Write(out); werr != nil {
			err = werr
		}
	}
	if err != nil {
		if st.echo.HTTP() {
			// The last HTTP reply: FIN after it, then linger.
			st.in = nil
			c.CloseLinger(LingerTimeout, LingerBytes)
			return false
		}
		c.Close()
		return false
	}
	st.in = keepTail(st.in, data, n)
	return false
}

// keepTail returns in holding data[n:], what a parser left of a read, to
// wait for the rest of its message: data is in itself when in held a tail
// before the read (appended to it), else the read's buffer, copied from.
// When in already holds it all and nothing was consumed, it stays where
// it is: moving it onto itself would cost a large message spanning many
// reads a copy of everything received so far per read.
func keepTail(in, data []byte, n int) []byte {
	rest := data[n:]
	switch {
	case len(in) > 0 && n > 0:
		return in[:copy(in, rest)]
	case len(in) == 0 && len(rest) > 0:
		return append(in[:0], rest...)
	}
	return in
}

func startEngine(ctx context.Context, b engine.Backend, batchWait time.Duration, cfg ServerConfig) (Server, error) {
	cfg = cfg.WithDefaults()
	return startEngineHandler(ctx, b, batchWait, cfg, &engineEcho{cfg: cfg})
}

// startEngineHandler starts an engine on backend b, its loops on cfg's
// CPUs, with Config.BatchWait batchWait, serving h on cfg.Addr; a backend
// that falls back to another, at New or as its loops start, is an error.
func startEngineHandler(ctx context.Context, b engine.Backend, batchWait time.Duration, cfg ServerConfig, h engine.Handler) (Server, error) {
	cfg = cfg.WithDefaults()
	cpus := cfg.CPUs
	if len(cpus) == 0 {
		// Unpinned: the loops go on the first CPUs this process may run
		// on, which under taskset or a cpuset need not be 0, 1, ….
		var err error
		if cpus, err = allowedCPUs(); err != nil {
			return nil, fmt.Errorf("bench: the CPUs this process may run on: %w", err)
		}
	}
	if cfg.Loops > len(cpus) {
		return nil, fmt.Errorf("bench: %d loops need %d distinct server CPUs, have %v", cfg.Loops, cfg.Loops, cpus)
	}
	cpus = cpus[:cfg.Loops]
	var logMu sync.Mutex
	var logs []string
	ecfg := &engine.Config{
		Backend: b, CPUs: cpus, SQPoll: engine.SQPollUnpinned, BatchWait: batchWait,
		Logf: func(format string, args ...any) {
			logMu.Lock()
			logs = append(logs, fmt.Sprintf(format, args...))
			logMu.Unlock()
		},
	}
	if b == engine.BackendURingSQPoll {
		// The SQPOLL thread goes on the first spare CPU, else the first
		// CPU outside the server's and the loops' (runtime.NumCPU counts
		// the CPUs the harness allowed before this process pinned
		// itself).
		if len(cfg.SpareCPUs) > 0 {
			ecfg.SQPoll = engine.SQPollOnCPU(cfg.SpareCPUs[0])
		} else {
			for c := range runtime.NumCPU() {
				if !slices.Contains(cfg.CPUs, c) && !slices.Contains(cpus, c) {
					ecfg.SQPoll = engine.SQPollOnCPU(c)
					break
				}
			}
		}
	}
	said := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Join(logs, "; ")
	}
	e, err := engine.New(ecfg, h)
	if err != nil {
		return nil, err
	}
	if e.Backend() != b {
		// Never measure a fallback under the requested backend's name.
		e.Shutdown(context.Background())
		return nil, fmt.Errorf("engine backend %s unavailable, it would fall back to %s: %s", b, e.Backend(), said())
	}
	ln, err := e.Listen("tcp", cfg.Addr, nil)
	if err != nil {
		e.Shutdown(context.Background())
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &engineServer{e: e, ln: ln, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- e.Run(rctx) }()
	// A loop may run another backend than New chose, the kernel refusing
	// its SQPOLL ring or NAPI registration at Run: Backend says so once
	// every loop has started, which BufferPages ("" until then) tells.
	for e.BufferPages() == "" {
		select {
		case err := <-s.done:
			cancel()
			return nil, fmt.Errorf("engine backend %s stopped while its loops started (%v): %s", b, err, said())
		case <-time.After(time.Millisecond):
		}
	}
	if e.Backend() != b {
		s.Close()
		return nil, fmt.Errorf("engine backend %s degraded at start-up, its loops run %s: %s", b, e.Backend(), said())
	}
	if got := engineBatchWait(e); got != batchWait {
		// The uring-batch arm without a minimum wait (a kernel without
		// IORING_FEAT_MIN_TIMEOUT) is plain uring: never report it as
		// uring-batch.
		s.Close()
		return nil, fmt.Errorf("engine backend %s with Config.BatchWait %v degraded at start-up, its loops wait with %v: %s", b, batchWait, got, said())
	}
	return s, nil
}

// Addr is the listening address. Any goroutine.
func (s *engineServer) Addr() net.Addr { return s.ln.Addr() }

// Counters reports the engine's kernel-wait counters. Its "waits" are
// every io_uring_enter (or epoll_wait) the loops made, the enters that
// only flushed a full SQ (Stats.Submits) among them, so those are
// "flushes" here, not "submits", which the harness adds to "waits" (the C
// server counts them apart). Any goroutine.
func (s *engineServer) Counters() map[string]uint64 {
	st := s.e.Stats()
	return map[string]uint64{"waits": st.Waits, "flushes": st.Submits, "sqes": st.SQEs, "cqes": st.CQEs, "wait_cpu_ns": st.WaitCPUNanos}
}

// Close stops the engine and waits for its loops. Any goroutine, once.
func (s *engineServer) Close() error {
	s.cancel()
	err := <-s.done
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
	"github.com/spindlenet/spindle/internal/veth"
	"github.com/spindlenet/spindle/topo"
	"github.com/spindlenet/spindle/uring"
)

func (c WakeupConfig) withDefaults() (WakeupConfig, error) {
	if c.Modes == nil {
		c.Modes = WakeupModes
	}
	if err := CheckWakeupModes(c.Modes); err != nil {
		return c, err
	}
	if c.Interval <= 0 {
		c.Interval = 50 * time.Millisecond
	}
	if c.Samples <= 0 {
		c.Samples = 60
	}
	if c.WriterCPU == nil {
		// The first CPU the process may run on other than the reader's
		// (CPU 1 with the reader on 0, else CPU 0, where both are
		// allowed); the reader's where it is the only one.
		w := c.ReaderCPU
		allowed, err := allowedCPUs()
		if err != nil {
			return c, err
		}
		if i := slices.IndexFunc(allowed, func(cpu int) bool { return cpu != c.ReaderCPU }); i >= 0 {
			w = allowed[i]
		}
		c.WriterCPU = &w
	}
	if c.ReaderCPU < 0 || *c.WriterCPU < 0 {
		return c, fmt.Errorf("bench: wake-up: negative CPU (reader %d, writer %d)", c.ReaderCPU, *c.WriterCPU)
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Tag == "" {
		c.Tag = strconv.Itoa(os.Getpid())
	}
	return c, nil
}

// Wakeup runs the wake-up experiment: for each mode, a writer thread
// writes an 8-byte timestamp every Interval over TCP and a reader thread
// waits for it in that mode; it reports the wake-up latency and the
// reader's CPU. It may be called from any goroutine.
func Wakeup(ctx context.Context, cfg WakeupConfig) (*WakeupReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	topo, err := NewTopology(cfg.Topology, cfg.Tag)
	if err != nil {
		return nil, err
	}
	defer topo.Close()
	rep := &WakeupReport{
		Schema: WakeupSchema, Started: time.Now().UTC(), Host: hostInfo(), Topology: topo.Name(),
		IntervalMS: float64(cfg.Interval) / 1e6, ReaderCPU: cfg.ReaderCPU, WriterCPU: *cfg.WriterCPU,
	}
	if topo.Name() == "loopback" {
		rep.Notes = append(rep.Notes, "loopback sockets have no NAPI id: busy-poll and uring-napi cannot poll a device here and behave like block and uring; use --topology wire")
	}
	if cfg.ReaderCPU == *cfg.WriterCPU {
		rep.Notes = append(rep.Notes, "reader and writer share a CPU: spin starves the writer")
	}
	var serverNS string
	if w, ok := topo.(*Wire); ok {
		serverNS = veth.Path(w.ServerNS)
	}
	for _, mode := range cfg.Modes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res, err := wakeupMode(ctx, cfg, mode, topo, serverNS)
		if err != nil {
			return nil, fmt.Errorf("bench: wake-up %s: %w", mode, err)
		}
		rep.Results = append(rep.Results, res)
		if res.Skipped != "" {
			fmt.Fprintf(cfg.Progress, "%-11s skipped: %s\n", mode, res.Skipped)
		} else {
			fmt.Fprintf(cfg.Progress, "%-11s p50 %7.1fµs  max %8.1fµs  reader CPU %5.1f%%\n", mode, res.Latency.P50, res.Latency.Max, res.ReaderCPUPercent)
		}
	}
	if n := wakeupStealNote(rep.Results); n != "" {
		rep.Notes = append(rep.Notes, n)
	}
	if n := wakeupTickNote(time.Duration(cfg.Samples) * cfg.Interval); n != "" {
		rep.Notes = append(rep.Notes, n)
	}
	return rep, nil
}

// enterThread moves the calling locked thread into a network namespace
// (if ns is set) and pins it.
func enterThread(ns string, cpu int) error {
	if err := joinNetNS(ns); err != nil {
		return err
	}
	return pinThread([]int{cpu})
}

// wakeupMode measures one mode with a fresh connection.
func wakeupMode(ctx context.Context, cfg WakeupConfig, mode string, topology Topology, serverNS string) (WakeupResult, error) {
	res := WakeupResult{Mode: mode}
	host, _, _ := net.SplitHostPort(topology.ListenAddr())
	ip := net.ParseIP(host).To4()
	if ip == nil {
		return res, fmt.Errorf("listen address %s is not IPv4", host)
	}
	// The reader hands its listening socket over with its port: this
	// goroutine closes it once the reader is done, and shuts it down to end
	// the reader's accept when the writer fails before connecting.
	type ready struct {
		lfd, port int
		err       error
	}
	listening := make(chan ready, 1)
	writerDone := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	hist := NewHistogram()
	var cpu0, cpu1 unix.Rusage
	var stat0, stat1 *topo.Stat
	var wall time.Duration
	base := time.Now()
	readerDone := make(chan error, 1)

	// Reader: listens, accepts one connection, then waits in mode.
	// Its namespace and affinity are changed: a thread of its own, never
	// unlocked and never the main thread (sys.LockedThread).
	go sys.LockedThread(func() {
		readerDone <- func() error {
			if err := enterThread(serverNS, cfg.ReaderCPU); err != nil {
				listening <- ready{err: err}
				return err
			}
			lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				listening <- ready{err: err}
				return err
			}
			fail := func(err error) error {
				unix.Close(lfd)
				listening <- ready{err: err}
				return err
			}
			if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte(ip)}); err != nil {
				return fail(os.NewSyscallError("bind", err))
			}
			if err := unix.Listen(lfd, 1); err != nil {
				return fail(os.NewSyscallError("listen", err))
			}
			sa, err := unix.Getsockname(lfd)
			if err != nil {
				return fail(os.NewSyscallError("getsockname", err))
			}
			listening <- ready{lfd: lfd, port: sa.(*unix.SockaddrInet4).Port}
			fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
			if err != nil {
				return os.NewSyscallError("accept4", err)
			}
			defer unix.Close(fd)
			w, err := newWaiter(mode, fd, cfg.Interval)
			if err != nil {
				return err
			}
			defer w.close()
			buf := make([]byte, 8)
			for i := range cfg.Samples + 2 {
				if i == 2 {
					unix.Getrusage(unix.RUSAGE_THREAD, &cpu0)
					stat0, _ = Proc{}.Stat()
					wall = time.Since(base)
				}
				b, err := w.wait(buf)
				now := time.Since(base)
				if err != nil {
					return err
				}
				sent := time.Duration(binary.LittleEndian.Uint64(b))
				if i >= 2 {
					hist.Record(now - sent)
				}
			}
			unix.Getrusage(unix.RUSAGE_THREAD, &cpu1)
			stat1, _ = Proc{}.Stat()
			wall = time.Since(base) - wall
			return nil
		}()
	})
	r := <-listening
	if r.err != nil {
		<-readerDone
		if errors.Is(r.err, errSkip) {
			res.Skipped = r.err.Error()
			return res, nil
		}
		return res, r.err
	}
	defer unix.Close(r.lfd)

	// Writer: connects and writes a timestamp every interval.
	go sys.LockedThread(func() { // as the reader
		writerDone <- func() error {
			if err := enterThread(topology.ClientNetNS(), *cfg.WriterCPU); err != nil {
				return err
			}
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			if err := unix.Connect(fd, &unix.SockaddrInet4{Port: r.port, Addr: [4]byte(ip)}); err != nil {
				return os.NewSyscallError("connect", err)
			}
			unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
			msg := make([]byte, 8)
			next := time.Now()
			for range cfg.Samples + 2 {
				next = next.Add(cfg.Interval)
				select {
				case <-stop:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Until(next)):
				}
				binary.LittleEndian.PutUint64(msg, uint64(time.Since(base)))
				if _, err := unix.Write(fd, msg); err != nil {
					return os.NewSyscallError("write", err)
				}
			}
			// Keep the connection open until the reader is done.
			<-stop
			return nil
		}()
	})
	var rerr error
	select {
	case rerr = <-readerDone:
	case werr := <-writerDone:
		if werr != nil {
			// A writer that failed before it connected leaves the reader
			// in accept: end it, and wait for the reader either way (one
			// that accepted sees the writer's socket closed).
			unix.Shutdown(r.lfd, unix.SHUT_RDWR)
			<-readerDone
			return res, werr
		}
		rerr = <-readerDone
	}
	if rerr != nil {
		if errors.Is(rerr, errSkip) {
			res.Skipped = rerr.Error()
			return res, nil
		}
		return res, rerr
	}
	res.Samples = int(hist.Count())
	res.Latency = hist.Percentiles()
	cpu := time.Duration(unix.TimevalToNsec(cpu1.Utime) - unix.TimevalToNsec(cpu0.Utime) + unix.TimevalToNsec(cpu1.Stime) - unix.TimevalToNsec(cpu0.Stime))
	if wall > 0 {
		res.ReaderCPUPercent = 100 * float64(cpu) / float64(wall)
	}
	if res.Samples > 0 {
		res.ReaderCPUUSPerWake = float64(cpu) / 1e3 / float64(res.Samples)
	}
	res.fillReaderCPU(stat0, stat1, cfg.ReaderCPU, wall)
	return res, nil
}

// errSkip marks a mode that cannot run here.
var errSkip = errors.New("not available")

// waiter waits for the next 8-byte message on a socket in one mode. It
// belongs to the reader's locked thread.
type waiter struct {
	mode  string
	fd    int
	ring  *uring.Ring
	arena *uring.Arena
	rbuf  []byte // off-heap receive buffer for io_uring
	cqes  []uring.CQE
}

func newWaiter(mode string, fd int, interval time.Duration) (*waiter, error) {
	w := &waiter{mode: mode, fd: fd}
	// Busy-poll budgets cover the whole interval plus slack, so the reader
	// polls until the data comes instead of falling asleep.
	budget := interval + interval/5
	switch mode {
	case WakeSpin:
		if err := unix.SetNonblock(fd, true); err != nil {
			return nil, err
		}
	case WakeBusyPoll:
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL, int(budget/time.Microsecond)); err != nil {
			return nil, fmt.Errorf("%w: SO_BUSY_POLL: %v", errSkip, err)
		}
	case WakeURing, WakeURingNAPI:
		r, err := uring.New(&uring.Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true})
		if err != nil {
			return nil, fmt.Errorf("%w: io_uring: %v", errSkip, err)
		}
		w.ring = r
		if w.arena, err = uring.NewArena(4096); err != nil {
			r.Close()
			return nil, err
		}
		w.rbuf = w.arena.Bytes(8)
		w.cqes = make([]uring.CQE, 4)
		if mode == WakeURingNAPI {
			if _, err := r.RegisterNAPI(uring.NAPIConfig{BusyPollTimeout: budget}); err != nil {
				w.close()
				return nil, fmt.Errorf("%w: IORING_REGISTER_NAPI: %v", errSkip, err)
			}
		}
	}
	return w, nil
}

// wait returns the next 8-byte message.
func (w *waiter) wait(buf []byte) ([]byte, error) {
	if w.ring != nil {
		sqe := w.ring.GetSQE()
		if sqe == nil {
			return nil, errors.New("io_uring: no free SQE")
		}
		sqe.PrepRecv(w.fd, w.rbuf, unix.MSG_WAITALL, 1)
		for {
			if _, err := w.ring.SubmitAndWait(1, 0); err != nil && err != unix.EINTR {
				return nil, err
			}
			if n := w.ring.PeekCQEs(w.cqes); n > 0 {
				c := w.cqes[0]
				if c.Res < 0 {
					return nil, os.NewSyscallError("io_uring recv", unix.Errno(-c.Res))
				}
				if c.Res != 8 {
					return nil, fmt.Errorf("io_uring recv returned %d bytes, want 8", c.Res)
				}
				return w.rbuf, nil
			}
		}
	}
	got := 0
	for got < len(buf) {
		n, err := unix.Read(w.fd, buf[got:])
		if err == unix.EAGAIN || err == unix.EINTR {
			continue // spin mode polls
		}
		if err != nil {
			return nil, os.NewSyscallError("read", err)
		}
		if n == 0 {
			return nil, io.ErrUnexpectedEOF
		}
		got += n
	}
	return buf, nil
}

func (w *waiter) close() {
	if w.ring != nil {
		w.ring.Close()
	}
	if w.arena != nil {
		w.arena.Close()
	}
}

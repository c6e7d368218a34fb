package uring

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/sys"
)

// Probe finds out which io_uring features this host offers, by asking the
// kernel (IORING_REGISTER_PROBE, setup attempts, registrations) and by
// running multishot accept and multishot recv once on loopback. It takes a
// few milliseconds and creates and closes several rings. Any goroutine.
func Probe() (*Features, error) {
	f := &Features{Kernel: kver.Release(), Disabled: readInt("/proc/sys/kernel/io_uring_disabled")}
	r, err := New(nil)
	if err != nil {
		f.Error = err.Error()
		return f, err
	}
	defer r.Close()
	f.Available = true
	f.FeatureFlags = r.KernelFeatures()
	add := func(kind, name, min string, err error, how string) {
		x := Feature{Name: name, Kind: kind, Supported: err == nil, MinKernel: min, Reason: how}
		if err != nil {
			x.Reason = err.Error()
			var pf *probeFailure
			x.Unknown = errors.As(err, &pf)
		}
		f.List = append(f.List, x)
	}

	var p sys.Probe
	perr := sys.RegisterProbe(r.fd, &p)
	add("register", "IORING_REGISTER_PROBE", "5.6", wrapReg(perr), "register probe")
	for _, o := range opInfo {
		var err error
		switch {
		case perr != nil:
			err = fmt.Errorf("unknown: no probe")
		case int(o.op) >= int(p.OpsLen) || p.Ops[o.op].Flags&sys.IO_URING_OP_SUPPORTED == 0:
			err = errors.New("opcode not supported by the kernel")
		}
		how := "IORING_REGISTER_PROBE"
		switch o.op {
		case sys.IORING_OP_RECV_ZC:
			how += "; the opcode only: zero-copy receive also needs a NIC queue (IORING_REGISTER_ZCRX_IFQ), not probed"
		case sys.IORING_OP_SEND_ZC:
			how += ", and a PrepSendZC send (with IORING_SEND_ZC_REPORT_USAGE, 6.2) on a loopback UDP socket"
			if err == nil {
				err = probeSendZC(0)
			}
		}
		add("op", o.name, o.min, err, how)
	}

	for _, kf := range kernelFeats {
		var err error
		if r.KernelFeatures()&kf.bit == 0 {
			err = errors.New("feature bit not set by io_uring_setup")
		}
		add("feature", kf.name, kf.min, err, "io_uring_setup features")
	}

	// Setup flags: try each on a small ring.
	try := func(flags uint32, cpu uint32, wq int) error {
		var sp sys.Params
		sp.Flags, sp.SQThreadCPU, sp.WQFd, sp.CQEntries = flags, cpu, uint32(wq), 16
		fd, err := sys.Setup(4, &sp)
		if err != nil {
			return os.NewSyscallError("io_uring_setup", err)
		}
		unix.Close(fd)
		return nil
	}
	add("setup", "IORING_SETUP_CQSIZE", "5.5", try(sys.IORING_SETUP_CQSIZE, 0, 0), "io_uring_setup")
	add("setup", "IORING_SETUP_SQPOLL", "5.1", try(sys.IORING_SETUP_SQPOLL, 0, 0), "io_uring_setup")
	// The SQ thread's CPU must be one the caller may run on (the kernel
	// refuses others with EINVAL, as it does a CPU that does not exist).
	affCPU := uint32(0)
	if cpus, err := sys.AllowedCPUs(); err == nil && len(cpus) > 0 {
		affCPU = uint32(cpus[0])
	}
	add("setup", "IORING_SETUP_SQ_AFF", "5.1", try(sys.IORING_SETUP_SQPOLL|sys.IORING_SETUP_SQ_AFF, affCPU, 0), fmt.Sprintf("io_uring_setup, SQ thread on CPU %d", affCPU))
	add("setup", "IORING_SETUP_ATTACH_WQ", "5.6", try(sys.IORING_SETUP_ATTACH_WQ, 0, r.fd), "io_uring_setup")
	add("setup", "IORING_SETUP_COOP_TASKRUN", "5.19", try(sys.IORING_SETUP_COOP_TASKRUN|sys.IORING_SETUP_TASKRUN_FLAG, 0, 0), "io_uring_setup")
	add("setup", "IORING_SETUP_SINGLE_ISSUER", "6.0", try(sys.IORING_SETUP_SINGLE_ISSUER, 0, 0), "io_uring_setup")
	add("setup", "IORING_SETUP_DEFER_TASKRUN", "6.1", try(sys.IORING_SETUP_SINGLE_ISSUER|sys.IORING_SETUP_DEFER_TASKRUN, 0, 0), "io_uring_setup")
	add("setup", "IORING_SETUP_NO_SQARRAY", "6.6", try(sys.IORING_SETUP_NO_SQARRAY, 0, 0), "io_uring_setup")

	// Registrations.
	add("register", "IORING_REGISTER_RING_FDS", "5.18", probeRingFd(r.fd), "register and unregister on a locked thread")
	add("register", "IORING_RSRC_REGISTER_SPARSE", "5.19", r.RegisterFiles(4), "sparse file table")
	if mem, _, err := sys.MapAnon(4096, false); err == nil {
		add("register", "IORING_REGISTER_BUFFERS", "5.1", r.RegisterBuffers([][]byte{mem}), "one off-heap page")
		r.UnregisterBuffers()
		sys.Unmap(mem)
	}
	// Sync cancel of something nothing in flight has: ENOENT where the
	// kernel understood the ask. Ring.Close waits with the opcode-keyed one
	// for requests running in io-wq.
	syncCancel := func(flags uint32) error {
		reg := sys.SyncCancelReg{Flags: flags, Opcode: sys.IORING_OP_NOP}
		if err := sys.SyncCancel(r.fd, &reg); err != unix.ENOENT {
			return wrapReg(err)
		}
		return nil
	}
	add("register", "IORING_REGISTER_SYNC_CANCEL", "6.0", syncCancel(0), "sync cancel of a user_data nothing in flight has")
	add("register", FeatSyncCancelOp, "6.6", syncCancel(sys.IORING_ASYNC_CANCEL_OP), "sync cancel of an opcode nothing in flight has")
	b, berr := r.SetupBufRing(0, 8, 256)
	add("register", "IORING_REGISTER_PBUF_RING", "5.19", berr, "8-entry ring")
	if berr == nil {
		_, herr := b.Head()
		add("register", "IORING_REGISTER_PBUF_STATUS", "6.8", herr, "buffer ring head query")
		b.Close()
	}
	_, nerr := r.RegisterNAPI(NAPIConfig{BusyPollTimeout: 50 * time.Microsecond})
	if nerr == nil {
		nerr = r.UnregisterNAPI()
	}
	add("register", FeatNAPI, "6.9", nerr, "register and unregister, dynamic tracking")
	if nerr == nil {
		_, serr := r.RegisterNAPI(NAPIConfig{BusyPollTimeout: 50 * time.Microsecond, Static: true})
		if serr == nil {
			serr = r.AddNAPIID(1 << 20)
		}
		if serr == nil {
			serr = r.RemoveNAPIID(1 << 20)
		}
		if err := r.UnregisterNAPI(); serr == nil {
			serr = err
		}
		add("register", FeatNAPIStatic, "6.13", serr, "static tracking with an id added and removed")
	} else {
		add("register", FeatNAPIStatic, "6.13", nerr, "needs IORING_REGISTER_NAPI")
	}

	aerr, werr := probeIOWQ()
	add("register", FeatIOWQAff, iowqAffMin, aerr, "register and unregister on a ring of a locked thread of its own, to the CPUs it may run on")
	add("register", FeatIOWQMaxWorkers, iowqMaxWorkersMin, werr, "read the limits (0, 0) on a ring of a locked thread of its own")

	// Behaviour: run multishot accept and multishot recv (plain and bundle).
	add("behaviour", FeatMultishotAccept, "5.19", probeMultishotAccept(), "accepted a loopback connection with F_MORE")
	add("behaviour", FeatMultishotRecv, "6.0", probeRecv(false, 0), "received on a socketpair through a buffer ring with F_MORE")
	add("behaviour", FeatRecvBundle, "6.10", probeRecv(true, 0), "bundle receive on a socketpair")
	add("behaviour", FeatRecvLimit, "6.17", probeRecv(false, 2), "multishot recv with a byte limit ended at it")
	add("behaviour", FeatShortSendLinkCut, "6.0", probeShortSend(false), "a MSG_DONTWAIT|MSG_WAITALL SEND cut short by a full socketpair, a NOP linked after it cancelled")
	add("behaviour", FeatShortSendSkipCleared, "6.0", probeShortSend(true), "a MSG_DONTWAIT|MSG_WAITALL SEND with IOSQE_CQE_SKIP_SUCCESS cut short by a full socketpair posted its result")
	return f, nil
}

func wrapReg(err error) error {
	if err == nil {
		return nil
	}
	return os.NewSyscallError("io_uring_register", err)
}

// probeRingFd registers and unregisters fd in a thread's registered-ring
// table, on a goroutine of its own: if the unregistration fails the thread
// keeps a reference to the ring, so it is not given back to the scheduler
// but exits with the goroutine (STYLE rule 5).
func probeRingFd(fd int) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		idx, err := sys.RegisterRingFd(fd)
		if err != nil {
			runtime.UnlockOSThread()
			done <- wrapReg(err)
			return
		}
		if err := sys.UnregisterRingFd(fd, idx); err != nil {
			done <- wrapReg(err) // still locked: the thread exits
			return
		}
		runtime.UnlockOSThread()
		done <- nil
	}()
	return <-done
}

// probeIOWQ tries the io-wq registrations on a ring of their own, made on a
// locked thread (io-wq belongs to the thread that made the ring), which is
// then never unlocked: it exits with the goroutine, and the affinity its
// io-wq was given and taken back with it.
func probeIOWQ() (aff, maxWorkers error) {
	cpus, err := sys.AllowedCPUs()
	if err != nil {
		return err, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sys.LockedThread(func() {
			r, err := New(&Config{Entries: 4})
			if err != nil {
				aff, maxWorkers = err, err
				return
			}
			defer r.Close()
			if aff = r.RegisterIOWQAffinity(cpus); aff == nil {
				aff = r.UnregisterIOWQAffinity()
			}
			_, _, maxWorkers = r.RegisterIOWQMaxWorkers(0, 0)
		})
	}()
	<-done
	return aff, maxWorkers
}

// probeWait bounds a probe's wait for each completion it expects.
const probeWait = time.Second

// probeReap submits what is prepared and waits, up to deadline, for one
// completion. It asks the kernel once more after the deadline, without
// waiting, before it gives up: the deadline may have passed while this
// thread did not run (for seconds on a loaded host), before the probe's SQE
// was even submitted, and only the kernel's answer says it did not complete.
// A probe that gave up instead reported the feature as unknown.
func probeReap(r *Ring, deadline time.Time) (CQE, error) {
	var c [1]CQE
	for {
		left := time.Until(deadline)
		if _, err := r.SubmitAndWait(1, max(left, time.Nanosecond)); err != nil && !errors.Is(err, unix.ETIME) {
			return CQE{}, err
		}
		if r.PeekCQEs(c[:]) == 1 {
			return c[0], nil
		}
		if left <= 0 {
			return CQE{}, fmt.Errorf("no completion within %v", probeWait)
		}
	}
}

// The probes below open their sockets before the ring, so that the ring,
// deferred last, is closed first: no socket is closed while a request on it
// is in flight.

// asked returns err, the error of a probe's ask (what it probes): the
// kernel's answer (nil or a *probeVerdict) as it is, and any other error,
// a failure to ask, as a *probeFailure: support unknown.
func asked(what string, err error) error {
	var verdict *probeVerdict
	if err != nil && !errors.As(err, &verdict) {
		return &probeFailure{fmt.Errorf("uring: could not probe %s: %w", what, err)}
	}
	return err
}

func probeMultishotAccept() error {
	return asked("multishot accept on 127.0.0.1", askMultishotAccept())
}

// askMultishotAccept is probeMultishotAccept's accept; the kernel's answer
// is a *probeVerdict.
func askMultishotAccept() error {
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return os.NewSyscallError("bind", err)
	}
	if err := unix.Listen(lfd, 4); err != nil {
		return os.NewSyscallError("listen", err)
	}
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		return os.NewSyscallError("getsockname", err)
	}
	cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(cfd)
	r, err := New(&Config{Entries: 4})
	if err != nil {
		return err
	}
	defer r.Close()
	r.GetSQE().PrepAcceptMultishot(lfd, unix.SOCK_CLOEXEC, false, 1)
	if _, err := r.Submit(); err != nil {
		return err
	}
	if err := unix.Connect(cfd, sa); err != nil {
		return os.NewSyscallError("connect", err)
	}
	c, err := probeReap(r, time.Now().Add(probeWait))
	if err != nil {
		return err
	}
	if c.Res < 0 {
		return &probeVerdict{c.Err()}
	}
	unix.Close(int(c.Res))
	if !c.More() {
		return &probeVerdict{errors.New("accept completed without IORING_CQE_F_MORE")}
	}
	return nil
}

// probeRecv runs one multishot receive through a buffer ring on a
// socketpair with "probe" waiting. Unlimited, plain or bundle, it must
// deliver the bytes and stay armed (More). Limited to 2 bytes
// (SetRecvLimit) with 2-byte buffers, it must deliver "pr" and end; a kernel
// without the limit refuses the SQE (-EINVAL). The kernel's answer is a
// *probeVerdict; any other error (no socketpair or ring, as when out of
// descriptors, or no answer) is a *probeFailure: support unknown.
func probeRecv(bundle bool, limit uint32) error {
	return asked("multishot recv on a socketpair", askRecv(bundle, limit))
}

// askRecv is probeRecv's receive; the kernel's answer is a *probeVerdict.
func askRecv(bundle bool, limit uint32) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socketpair", err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	r, err := New(&Config{Entries: 4})
	if err != nil {
		return err
	}
	defer r.Close() // also closes the buffer ring, after cancelling the receive
	want, bufSize := "probe", 64
	if limit > 0 {
		want, bufSize = want[:limit], int(limit)
	}
	b, err := r.SetupBufRing(1, 4, bufSize)
	if errors.Is(err, ErrNotSupported) {
		// A kernel without buffer rings (before 5.19) has no receive
		// through one: its answer.
		return &probeVerdict{err}
	}
	if err != nil {
		return err
	}
	if _, err := unix.Write(fds[1], []byte("probe")); err != nil {
		return os.NewSyscallError("write", err)
	}
	q := r.GetSQE()
	q.PrepRecvMultishot(fds[0], 1, bundle, 0, 1)
	q.SetRecvLimit(limit)
	c, err := probeReap(r, time.Now().Add(probeWait))
	if err != nil {
		return err
	}
	if c.Res < 0 {
		return &probeVerdict{c.Err()}
	}
	if id, ok := c.BufferID(); !ok || string(b.Buf(id)[:c.Res]) != want {
		return &probeVerdict{fmt.Errorf("received %d bytes without the expected buffer", c.Res)}
	}
	switch {
	case limit == 0 && !c.More():
		return &probeVerdict{errors.New("recv completed without IORING_CQE_F_MORE")}
	case limit > 0 && c.More():
		return &probeVerdict{fmt.Errorf("a receive limited to %d bytes got them and stays armed", limit)}
	}
	return nil
}

// probeSendZC sends one datagram to a loopback UDP socket with PrepSendZC,
// its ioprio ORed with extra (0 but in tests), and waits for the send's
// CQE and its notification. The kernel's refusal (6.0 and 6.1 refuse
// IORING_SEND_ZC_REPORT_USAGE with -EINVAL), or a send that does not
// behave, is an *UnsupportedFeatureError wrapping a *probeVerdict; any
// other error is a failure to ask (no loopback, no ring, no answer).
func probeSendZC(extra uint16) error {
	err := asked("SEND_ZC", askSendZC(extra))
	var verdict *probeVerdict
	if errors.As(err, &verdict) {
		return unsupported("IORING_OP_SEND_ZC with IORING_SEND_ZC_REPORT_USAGE", "6.2", err)
	}
	return err
}

// askSendZC is probeSendZC's send; the kernel's answer is a *probeVerdict.
func askSendZC(extra uint16) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("UDP socket on 127.0.0.1: %w", os.NewSyscallError("bind", err))
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return os.NewSyscallError("getsockname", err)
	}
	if err := unix.Connect(fd, sa); err != nil { // to itself
		return fmt.Errorf("UDP socket on 127.0.0.1 to itself: %w", os.NewSyscallError("connect", err))
	}
	r, buf, done, err := probeSendRing(4096)
	if err != nil {
		return err
	}
	defer done()
	copy(buf, "probe")
	q := r.GetSQE()
	q.PrepSendZC(fd, buf[:5], 0, -1, 1)
	q.Ioprio |= extra
	c, err := probeReap(r, time.Now().Add(probeWait))
	if err != nil {
		return err
	}
	if c.Res < 0 {
		return &probeVerdict{c.Err()}
	}
	if c.Res != 5 || !c.More() {
		return &probeVerdict{fmt.Errorf("send completed with res %d, flags %#x: want 5 bytes and a notification to come", c.Res, c.Flags)}
	}
	if c, err = probeReap(r, time.Now().Add(probeWait)); err != nil {
		return err
	}
	if !c.Notif() {
		return &probeVerdict{fmt.Errorf("second completion flags %#x: not the notification", c.Flags)}
	}
	return nil
}

// probeSendRing makes what a probe's SEND needs besides its socket: a
// buffer of size bytes off the Go heap and a ring of its own. done closes
// the ring, then unmaps the buffer, which no send refers to once the ring
// is closed.
func probeSendRing(size int) (r *Ring, buf []byte, done func(), err error) {
	buf, _, err = sys.MapAnon(size, false)
	if err != nil {
		return nil, nil, nil, err
	}
	r, err = New(&Config{Entries: 4})
	if err != nil {
		sys.Unmap(buf)
		return nil, nil, nil, err
	}
	return r, buf, func() { r.Close(); sys.Unmap(buf) }, nil
}

// shortSendSize is what the short-send probe sends at once: far more than
// a socketpair with the smallest send buffer takes.
const shortSendSize = 256 << 10

// probeShortSend sends shortSendSize bytes with one MSG_DONTWAIT|MSG_WAITALL
// SEND on a socketpair whose peer does not read and whose send buffer is the
// smallest, so that the SEND is cut short: some bytes sent, not all. Linked
// to a NOP (skip false), the cut must fail the link: the SEND posts the
// bytes it sent and the NOP ECANCELED, where a NOP that ran posts 0. Alone
// with FlagCQESkipSuccess (skip true), the cut must post the SEND's result
// all the same, before a NOP submitted after it. The kernel's answer is a
// *probeVerdict; a SEND that was not cut short (the socket took it all, or
// nothing: EAGAIN) asks nothing, and is a *probeFailure, as is any failure
// to make the socketpair, the buffer or the ring.
func probeShortSend(skip bool) error {
	return asked("a short SEND on a socketpair", askShortSend(skip))
}

// askShortSend is probeShortSend's SEND; the kernel's answer is a
// *probeVerdict.
func askShortSend(skip bool) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socketpair", err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		return os.NewSyscallError("setsockopt SO_SNDBUF", err)
	}
	r, buf, done, err := probeSendRing(shortSendSize)
	if err != nil {
		return err
	}
	defer done()
	q := r.GetSQE()
	q.PrepSend(fds[0], buf, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT|unix.MSG_WAITALL, 1)
	if skip {
		q.SetFlags(FlagCQESkipSuccess)
	} else {
		q.SetFlags(FlagIOLink)
	}
	r.GetSQE().PrepNop(2)
	deadline := time.Now().Add(probeWait)
	c, err := probeReap(r, deadline)
	if err != nil {
		return err
	}
	if c.UserData == 2 {
		// The skipped SEND posted nothing: the bytes the peer has
		// queued say whether it was cut short.
		n, err := unix.IoctlGetInt(fds[1], unix.SIOCINQ)
		if err != nil {
			return os.NewSyscallError("ioctl SIOCINQ", err)
		}
		if n <= 0 || n >= shortSendSize {
			return fmt.Errorf("the SEND was not cut short (%d of %d bytes queued at the peer)", n, shortSendSize)
		}
		return &probeVerdict{fmt.Errorf("a SEND with IOSQE_CQE_SKIP_SUCCESS cut short (%d of %d bytes) posted no completion", n, shortSendSize)}
	}
	if c.Res <= 0 || c.Res >= shortSendSize {
		return fmt.Errorf("the SEND was not cut short (res %d of %d bytes)", c.Res, shortSendSize)
	}
	if skip {
		return nil
	}
	if c, err = probeReap(r, deadline); err != nil {
		return err
	}
	if c.Res != -int32(unix.ECANCELED) {
		return &probeVerdict{fmt.Errorf("a SEND cut short did not fail its link: the NOP after it completed with res %d, not ECANCELED", c.Res)}
	}
	return nil
}

// probedFeature is a kernel feature probed once per process: the kernel's
// answer is kept, a probe that could not ask is tried again.
type probedFeature struct {
	mu    sync.Mutex
	known bool  // the kernel answered: err is its verdict
	err   error // nil: supported
}

// check returns the kept answer, or runs probe and returns its error,
// keeping it if it is the kernel's answer (nil or a *probeVerdict).
func (p *probedFeature) check(probe func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known {
		return p.err
	}
	err := probe()
	var verdict *probeVerdict
	if err == nil || errors.As(err, &verdict) {
		p.known, p.err = true, err
	}
	return err
}

func (p *probedFeature) has(probe func() error) bool { return p.check(probe) == nil }

var recvLimit, sendZC, shortSendLinkCut, shortSendSkipCleared probedFeature

// HasShortSendLinkCut reports whether a MSG_DONTWAIT|MSG_WAITALL SEND that
// sends less than its length fails its link (FlagIOLink): the rest of its
// chain is cancelled (ECANCELED) rather than run after the bytes it did not
// send. Probed once (probeShortSend) on a ring of its own. The kernel's
// answer is kept for the life of the process; a probe that could not ask
// reports false and is tried again at the next call. Any goroutine.
func HasShortSendLinkCut() bool {
	return shortSendLinkCut.has(func() error { return probeShortSend(false) })
}

// HasShortSendSkipCleared reports whether a MSG_DONTWAIT|MSG_WAITALL SEND
// with FlagCQESkipSuccess that sends less than its length posts its
// completion all the same (the kernel, failing it, clears the skip), probed
// and kept as HasShortSendLinkCut is. Where it does not, such a SEND posts
// nothing whether it sent all or not. Any goroutine.
func HasShortSendSkipCleared() bool {
	return shortSendSkipCleared.has(func() error { return probeShortSend(true) })
}

// HasRecvLimit reports whether multishot receives take a byte limit
// (SQE.SetRecvLimit), probed on a ring of its own. The kernel's answer is
// kept for the life of the process; a probe that could not ask (no ring,
// no socket, no answer within a second) reports false and is tried again
// at the next call. Any goroutine.
func HasRecvLimit() bool {
	return recvLimit.has(func() error { return probeRecv(false, 2) })
}

// HasSendZC reports whether PrepSendZC's sends work (Linux 6.2: SEND_ZC
// with IORING_SEND_ZC_REPORT_USAGE; 6.0 and 6.1 have the opcode but
// refuse the flag), probed once with a datagram to a loopback UDP socket
// on a ring of its own. The kernel's answer is kept for the life of the
// process; a probe that could not ask reports false and is tried again at
// the next call (ProbeSendZC tells the two apart). Any goroutine.
func HasSendZC() bool { return ProbeSendZC() == nil }

// ProbeSendZC is HasSendZC with the reason: nil where PrepSendZC's sends
// work; where the kernel refuses them (or they do not behave), an
// *UnsupportedFeatureError, so errors.Is(err, ErrNotSupported) holds, kept
// for the life of the process like HasSendZC's answer; and any other error
// where the probe could not ask the kernel (a network namespace whose
// loopback is down, no ring, no answer within a second), tried again at the
// next call. Any goroutine.
func ProbeSendZC() error {
	return sendZC.check(func() error { return probeSendZC(0) })
}

// probeVerdict is a probe's error that is the kernel's answer (a
// completion's error or behaviour), not a failure to ask.
type probeVerdict struct{ error }

func (v *probeVerdict) Unwrap() error { return v.error }

// probeFailure is a probe's failure to ask the kernel (its sockets, its
// ring, no answer): the feature's support is unknown (Feature.Unknown).
type probeFailure struct{ error }

func (f *probeFailure) Unwrap() error { return f.error }

func readInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

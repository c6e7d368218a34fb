package engine

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
	"github.com/spindlenet/spindle/uring"
)

// TestReceiveBuffersMappedUntilRingRequestsEnd stops a uring loop while a
// request of its ring that took a buffer of the loop's receive ring is
// still running: a read of a file forced into io-wq (the engine's own
// requests never go there), held in the copy into buffer 0 by a
// userfaultfd fault. The loop closed its receive ring before its ring, so
// the buffers were unmapped while the read still meant to write into
// them: their address free for any new mapping. Closing the ring first,
// its Close waits for the read (IORING_REGISTER_SYNC_CANCEL by opcode,
// 6.6) with the buffers mapped; the read, released during that wait,
// writes into them, and only then are they unmapped (TestMain: no mapping
// left).
func TestReceiveBuffersMappedUntilRingRequestsEnd(t *testing.T) {
	f, err := uring.Probe()
	if err != nil {
		t.Fatal(err)
	}
	if !f.Has(uring.FeatSyncCancelOp) {
		t.Skipf("%s missing on %s (Ring.Close cannot wait for a request running in io-wq): %v", uring.FeatSyncCancelOp, f.Kernel, f.Err(uring.FeatSyncCancelOp))
	}
	data := []byte("written by a read the ring's Close waits for")
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	cfg := testConfig(BackendURing)
	cfg.CPUs = []int{0}
	cfg.NoHugePages = true // buffer 0 on its own base pages, for userfaultfd
	e := newEngine(t, cfg, &echoHandler{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	defer stop()
	waitFor(t, "the loop to start", func() bool { return len(e.Loops()) == 1 && e.Loops()[0].ringFd.Load() >= 0 })

	// No connection has received anything: buffer 0, the next the kernel
	// picks, has never been touched.
	l := e.Loops()[0]
	buf0 := make(chan []byte, 1)
	l.Post(func() { buf0 <- l.be.(*uringBackend).br.Buf(0) })
	b0 := <-buf0
	pages := b0[:min(len(b0), os.Getpagesize())]
	release := holdWrites(t, pages)
	l.Post(func() {
		b := l.be.(*uringBackend)
		q := b.sqe()
		q.PrepRead(fd, nil, 0, udata(opCancel, 0, 0))
		q.Len = uint32(len(data))
		q.SetBufGroup(b.br.Group())
		q.SetFlags(uring.FlagAsync)
		// Not counted in flight: the loop stops without waiting for it.
	})
	waitWorkerIn(t, "handle_userfault")

	cancel()
	waitFor(t, "the loop to close its ring", func() bool { return l.ringFd.Load() < 0 })
	// The loop closes its rings at once; the ring's Close then waits up
	// to a second for the read.
	time.Sleep(100 * time.Millisecond)
	mappedWhileRunning := unix.Msync(pages, unix.MS_ASYNC) == nil
	release()
	stop()
	if !mappedWhileRunning {
		t.Fatal("the loop's receive buffers were unmapped while a read of its ring was still writing into buffer 0")
	}
}

// userfaultfd ioctls (include/uapi/linux/userfaultfd.h).
const (
	uffdAPI                 = 0xAA
	uffdioAPI               = 0xc018aa3f // _IOWR(0xAA, 0x3F, struct uffdio_api)
	uffdioRegister          = 0xc020aa00 // _IOWR(0xAA, 0x00, struct uffdio_register)
	uffdRegisterModeMissing = 1
)

// holdWrites makes every write into mem (whole pages never touched) wait
// in the kernel (handle_userfault), writes by the kernel (copy_to_user)
// included, until release closes the userfaultfd; the faults then resolve
// as usual (zero pages) and the writes go on. release is idempotent and
// also runs at cleanup. It skips t where userfaultfd is missing or may not
// hold kernel-mode faults.
func holdWrites(t *testing.T, mem []byte) (release func()) {
	t.Helper()
	ufd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|unix.O_NONBLOCK, 0, 0)
	switch e {
	case 0:
	case unix.ENOSYS:
		t.Skip("userfaultfd not supported (CONFIG_USERFAULTFD)")
	case unix.EPERM:
		t.Skip("userfaultfd of kernel-mode faults needs CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1")
	default:
		t.Fatalf("userfaultfd: %v", e)
	}
	var once sync.Once
	release = func() { once.Do(func() { unix.Close(int(ufd)) }) }
	t.Cleanup(release)
	// The ioctl arguments off the Go heap: their address goes to the kernel
	// as an integer.
	arg, _, err := sys.MapAnon(32, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Unmap(arg)
	binary.NativeEndian.PutUint64(arg, uffdAPI) // struct uffdio_api {api, features, ioctls}
	if err := ioctlAddr(int(ufd), uffdioAPI, arg); err != nil {
		t.Fatalf("UFFDIO_API: %v", err)
	}
	clear(arg) // struct uffdio_register {range {start, len}, mode, ioctls}
	binary.NativeEndian.PutUint64(arg[0:], sys.SliceAddr(mem))
	binary.NativeEndian.PutUint64(arg[8:], uint64(len(mem)))
	binary.NativeEndian.PutUint64(arg[16:], uffdRegisterModeMissing)
	if err := ioctlAddr(int(ufd), uffdioRegister, arg); err != nil {
		t.Fatalf("UFFDIO_REGISTER: %v", err)
	}
	return release
}

// ioctlAddr calls ioctl(fd, req, arg) with the address of arg, which must
// be off the Go heap.
func ioctlAddr(fd int, req uintptr, arg []byte) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(sys.SliceAddr(arg))); e != 0 {
		return e
	}
	return nil
}

// waitWorkerIn waits until an io-wq worker of the process sleeps in wchan.
func waitWorkerIn(t testing.TB, wchan string) {
	t.Helper()
	waitFor(t, "an io-wq worker waiting in "+wchan, func() bool {
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, task := range tasks {
			comm, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/comm")
			w, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/wchan")
			if strings.HasPrefix(string(comm), "iou-wrk") && string(w) == wchan {
				return true
			}
		}
		return false
	})
}

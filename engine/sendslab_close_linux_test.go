package engine

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/uring"
)

// TestSendSlabMappedAfterUnconfirmedRingClose stops a uring loop while a
// send of its ring still reads a chunk of the loop's send slab: a SEND
// forced into io-wq, held in the copy from the chunk's first page by a
// userfaultfd fault for longer than the ring's Close waits (a second), so
// that Close cannot confirm that the ring's requests have ended. The loop
// unmapped its send slab after that Close all the same, and the send, once
// released, read an address free for any new mapping: bytes of unrelated
// memory could go to the peer. Now the slab stays mapped, and the engine
// says so with the ring's error, and LeftMappedBytes counts it; the test
// unmaps it once the send is done (TestMain: no mapping left but the
// receive ring the ring's Close keeps).
func TestSendSlabMappedAfterUnconfirmedRingClose(t *testing.T) {
	f, err := uring.Probe()
	if err != nil {
		t.Fatal(err)
	}
	if !f.Has(uring.FeatSyncCancelOp) {
		t.Skipf("%s missing on %s (Ring.Close cannot tell that a request still runs in io-wq): %v", uring.FeatSyncCancelOp, f.Kernel, f.Err(uring.FeatSyncCancelOp))
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])

	cfg := testConfig(BackendURing)
	cfg.CPUs = []int{0}
	cfg.NoHugePages = true // the chunk on its own base pages, for userfaultfd
	var logMu sync.Mutex
	var logged []string
	cfg.Logf = func(format string, args ...any) {
		logMu.Lock()
		logged = append(logged, fmt.Sprintf(format, args...))
		logMu.Unlock()
	}
	e := newEngine(t, cfg, &echoHandler{})
	stopRun := runUntilStopped(t, e)
	stop := func() {
		if err := stopRun(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	waitFor(t, "the loop to start", func() bool { return len(e.Loops()) == 1 && e.Loops()[0].ringFd.Load() >= 0 })

	// A chunk of a region mapped now has never been touched (the first
	// region may be registered for SEND_ZC, which faults its pages in).
	// The slab's regions, for the test to unmap once the send is done:
	// nothing else keeps them once the loop has left them mapped.
	l := e.Loops()[0]
	chunk := make(chan []byte, 1)
	var regions [][]byte
	l.Post(func() {
		if err := l.chunks.grow(); err != nil {
			t.Error(err)
			chunk <- nil
			return
		}
		id, _ := l.chunks.get()
		regions = slices.Clone(l.chunks.regions)
		chunk <- l.chunks.buf(id)
	})
	c := <-chunk
	if c == nil {
		return
	}
	slabBytes := int64(0)
	for _, r := range regions {
		slabBytes += int64(len(r))
	}
	page := c[:min(len(c), os.Getpagesize())]
	release := holdWrites(t, page) // a read of a missing page waits as well
	l.Post(func() {
		b := l.be.(*uringBackend)
		q := b.sqe()
		q.PrepSend(fds[0], page, 0, udata(opCancel, 0, 0))
		q.SetFlags(uring.FlagAsync)
		// Not counted in flight: the loop stops without waiting for it.
	})
	waitWorkerIn(t, "handle_userfault")

	leftBefore, slabBefore := uring.LeftMappedBytes(), LeftMappedBytes()
	stop() // the ring's Close gives up on the send after a second
	if uring.LeftMappedBytes() > leftBefore {
		// The ring's Close left the loop's receive ring mapped, as it
		// must: uring owns that mapping, so TestMain does not count it.
		ringLeftMappings.Add(1)
	} else {
		t.Error("the ring's Close confirmed that its requests had ended although a send was still held")
	}
	mappedAfterStop := unix.Msync(page, unix.MS_ASYNC) == nil
	slabLeft := LeftMappedBytes() - slabBefore
	release()
	// The send ends: its bytes reach the peer once it has copied them,
	// and then nothing reads the slab any more.
	got := make([]byte, len(page))
	unix.SetsockoptTimeval(fds[1], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
	n, err := unix.Read(fds[1], got)
	if err != nil || n == 0 {
		t.Errorf("the held send sent nothing after its release: %d bytes, %v", n, err)
	}
	if !mappedAfterStop {
		t.Fatal("the loop unmapped its send slab while a send of its ring, which the ring's Close could not confirm as ended, still read it")
	}
	releaseLeftSlab(regions, slabLeft)
	if slabLeft != slabBytes {
		t.Errorf("LeftMappedBytes grew by %d, want %d (the slab's %d regions)", slabLeft, slabBytes, len(regions))
	}
	logMu.Lock()
	defer logMu.Unlock()
	said := false
	for _, m := range logged {
		said = said || strings.Contains(m, "send slab")
	}
	if !said {
		t.Errorf("the engine did not say that it left the send slab mapped; it said %q", logged)
	}
}

// ringLeftMappings counts the receive rings of loops whose ring's Close
// left them mapped (uring.LeftMappedBytes): off-heap mappings uring keeps on
// purpose, for the life of the process.
var ringLeftMappings atomic.Int64

// releaseLeftSlab unmaps the regions of a send slab a loop left mapped
// (n bytes of LeftMappedBytes), for a test whose requests have ended since
// (TestMain counts live mappings).
func releaseLeftSlab(regions [][]byte, n int64) {
	for _, r := range regions {
		if unmapMem(r) == nil {
			liveMappings.Add(-1)
		}
	}
	leftBytes.Add(-n)
}

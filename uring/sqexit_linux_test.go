package uring

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCloseWaitsForSlowSQThreadExit closes an SQPoll ring with a buffer
// ring while the kernel's teardown of the ring, which the SQ thread's exit
// waits for, is held up for 1.5s, longer than closeWait: the thread that
// created the ring is frozen (cgroup v1 freezer), and the teardown
// (io_ring_exit_work, 6.18) waits for each thread that used the ring to
// run a task work before it frees the ring and stops the SQ thread. That
// is how a loaded host delays it, the creator waiting its turn to run. No
// request is in flight, so Close must wait for the exit and confirm: Close
// gave up at its one second (ErrCancelUnconfirmed, the buffers left mapped
// for the life of the process, as the engine's leak check saw under load).
func TestCloseWaitsForSlowSQThreadExit(t *testing.T) {
	needFeatures(t, "IORING_SETUP_SQPOLL")
	cg := freezerCgroup(t)

	type created struct {
		r    *Ring
		slab []byte
		tid  int
		err  error
	}
	ch := make(chan created)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		r, err := New(&Config{Entries: 8, SQPoll: true})
		if err != nil {
			ch <- created{err: err}
			return
		}
		b, err := r.SetupBufRing(1, 4, 4096)
		if err != nil {
			r.Close()
			ch <- created{err: err}
			return
		}
		ch <- created{r: r, slab: b.slab[:cap(b.slab)], tid: unix.Gettid()}
		<-done // parked, holding no P, while frozen
	}()
	c := <-ch
	if c.err != nil {
		t.Fatal(c.err)
	}
	r := c.r
	defer func() {
		cg.thaw()
		if !r.closed {
			r.Close()
		}
		close(done)
		<-exited
	}()
	if r.sqThread == 0 {
		t.Fatal("the ring's SQ thread is unknown")
	}
	// Freeze the creator only once it sleeps in its futex: a thread frozen
	// while it runs Go code would hold its P, and a stop-the-world would
	// wait for it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/wchan", c.tid))
		if bytes.HasPrefix(wchan, []byte("futex")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ring's creator thread did not park within 5s (wchan %q)", wchan)
		}
	}
	cg.freeze(t, c.tid)

	// The thaw comes from a process of its own, which this one's runtime
	// cannot hold up.
	thaw := exec.Command("sh", "-c", "sleep 1.5 && echo THAWED > "+cg.state())
	if err := thaw.Start(); err != nil {
		t.Fatal(err)
	}
	before := LeftMappedBytes()
	err := r.Close()
	stateAtReturn := cg.current(t)
	if err := thaw.Wait(); err != nil {
		t.Errorf("thawing the creator thread: %v", err)
	}
	if err != nil {
		// Left mapped; nothing writes into them once the SQ thread is gone.
		for deadline := time.Now().Add(10 * time.Second); isSQThread(r.sqThread) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		releaseLeftMapped(c.slab)
		t.Fatalf("Close while the ring's teardown waited 1.5s for its frozen creator: %v, want nil (no request was in flight: the SQ thread's exit was only slow)", err)
	}
	if stateAtReturn != "THAWED" {
		t.Errorf("Close returned with the creator thread %s: the SQ thread cannot have exited", stateAtReturn)
	}
	if isSQThread(r.sqThread) {
		t.Error("the SQ thread is still there after Close confirmed")
	}
	if mapped(c.slab) || LeftMappedBytes() != before {
		t.Errorf("buffers left mapped (%d bytes) after a confirmed Close", LeftMappedBytes()-before)
	}
}

// freezer is a cgroup v1 freezer cgroup made for one test, below the
// process's own.
type freezer struct {
	parent string // the process's freezer cgroup directory
	dir    string
}

// freezerCgroup makes a freezer cgroup for t, removed at its end (the
// threads it froze thawed and moved back first), or skips t without root or
// a cgroup v1 freezer: cgroup v2 freezes whole processes only.
func freezerCgroup(t *testing.T) *freezer {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("freezing a thread (cgroup v1 freezer) needs root")
	}
	const root = "/sys/fs/cgroup/freezer"
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	own := ""
	for s := bufio.NewScanner(f); s.Scan(); {
		// hierarchy-ID:controllers:path
		if p := strings.SplitN(s.Text(), ":", 3); len(p) == 3 && p[1] == "freezer" {
			own = p[2]
		}
	}
	if own == "" {
		t.Skip("no cgroup v1 freezer hierarchy in /proc/self/cgroup: no way to freeze one thread (cgroup v2 freezes whole processes)")
	}
	if _, err := os.Stat(filepath.Join(root, own, "tasks")); err != nil {
		t.Skipf("the cgroup v1 freezer is not mounted at %s: %v", root, err)
	}
	fz := &freezer{parent: filepath.Join(root, own), dir: filepath.Join(root, own, fmt.Sprintf("spindle-test-%d", os.Getpid()))}
	if err := os.Mkdir(fz.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fz.thaw()
		b, _ := os.ReadFile(filepath.Join(fz.dir, "tasks"))
		for _, tid := range strings.Fields(string(b)) {
			if err := os.WriteFile(filepath.Join(fz.parent, "tasks"), []byte(tid), 0); err != nil {
				t.Errorf("moving thread %s back to %s: %v", tid, fz.parent, err)
			}
		}
		if err := os.Remove(fz.dir); err != nil {
			t.Error(err)
		}
	})
	return fz
}

// state returns the path of the cgroup's freezer.state.
func (fz *freezer) state() string { return filepath.Join(fz.dir, "freezer.state") }

// thaw thaws the cgroup's threads, if frozen.
func (fz *freezer) thaw() { os.WriteFile(fz.state(), []byte("THAWED"), 0) }

// current returns the cgroup's freezer state: THAWED, FREEZING or FROZEN.
func (fz *freezer) current(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(fz.state())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// freeze moves thread tid of this process into the cgroup and freezes it,
// waiting until the kernel says it is frozen.
func (fz *freezer) freeze(t *testing.T, tid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(fz.dir, "tasks"), []byte(fmt.Sprint(tid)), 0); err != nil {
		t.Fatalf("moving thread %d into %s: %v", tid, fz.dir, err)
	}
	if err := os.WriteFile(fz.state(), []byte("FROZEN"), 0); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); fz.current(t) != "FROZEN"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("thread %d not frozen within 5s (%s)", tid, fz.current(t))
		}
	}
}

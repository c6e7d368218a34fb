package hugetlb

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// recorder is the testing.TB Grow gets in these tests: it records whether
// Grow skipped or failed, and runs the cleanups when told.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
	cleanups        []func()
}

func (r *recorder) Helper()                      {}
func (r *recorder) Cleanup(f func())             { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(f string, args ...any) { r.failed, r.msg = true, fmt.Sprintf(f, args...) }
func (r *recorder) Error(args ...any)            { r.failed, r.msg = true, fmt.Sprint(args...) }
func (r *recorder) Skip(args ...any)             { r.skipped, r.msg = true, fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Skipf(f string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(f, args...)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) { r.failed, r.msg = true, fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Fatalf(f string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(f, args...)
	runtime.Goexit()
}

// grow runs Grow(r, sys.HugePageSize(), 1) on a goroutine of its own after setup (nil: none),
// then use with the pool (nil: nothing), then r's cleanups, and returns r.
func grow(t *testing.T, setup func() error, use func(*Pool)) *recorder {
	t.Helper()
	r := &recorder{}
	done := make(chan error, 1)
	// setup may change its thread (a mount namespace of its own).
	go sys.LockedThread(func() {
		if setup != nil {
			if err := setup(); err != nil {
				done <- err
				return
			}
		}
		defer func() { done <- nil }()
		p := Grow(r, sys.HugePageSize(), 1)
		if use != nil {
			use(p)
		}
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	return r
}

// TestGrowSkipsWithoutPool: a kernel without the pool (no CONFIG_HUGETLBFS,
// or no huge pages of that size) is a missing feature, a skip; Grow failed
// the test.
func TestGrowSkipsWithoutPool(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: Grow skips before it looks for the pool otherwise")
	}
	saved := pools
	t.Cleanup(func() { pools = saved })
	pools = t.TempDir()
	path := poolPath(sys.HugePageSize())
	r := grow(t, nil, nil)
	if !r.skipped || r.failed || !strings.Contains(r.msg, path) {
		t.Errorf("skipped %v, failed %v (%s); want a skip naming %s", r.skipped, r.failed, r.msg, path)
	}
}

// TestGrowSkipsReadOnlySysfs: root in a container commonly sees sysfs
// mounted read-only, where the pool cannot grow: a skip, not a failure.
// The test makes the pool's directory read-only in a mount namespace of a
// thread of its own, which exits afterwards (never unlocked).
func TestGrowSkipsReadOnlySysfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace")
	}
	path := poolPath(sys.HugePageSize())
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no hugetlb pool of sys.HugePageSize(): %v", err)
	}
	dir := filepath.Dir(path)
	r := grow(t, func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return os.NewSyscallError("unshare", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return os.NewSyscallError("mount private", err)
		}
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return os.NewSyscallError("mount bind", err)
		}
		return os.NewSyscallError("mount ro", unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""))
	}, nil)
	if !r.skipped || r.failed {
		t.Errorf("skipped %v, failed %v (%s); want a skip", r.skipped, r.failed, r.msg)
	}
}

// TestTakeRunsAgainAfterThePageWasTaken: a page Grow added can go to any
// process that maps hugetlb memory before the test does (here this test,
// standing in for another test binary's engine). Take must make a page
// free again and run the attempt again, which then gets it.
func TestTakeRunsAgainAfterThePageWasTaken(t *testing.T) {
	size := sys.HugePageSize()
	pool := Grow(t, size, 1)
	var held [][]byte
	defer func() {
		for _, b := range held {
			if err := sys.Unmap(b); err != nil {
				t.Error(err)
			}
		}
	}()
	runs := 0
	pool.Take(func() bool {
		runs++
		if runs == 1 {
			b, _, err := sys.MapAnon(size, true)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, b)
		}
		b, kind, err := sys.MapAnon(size, true)
		if err != nil {
			t.Fatal(err)
		}
		if kind != sys.PageHuge {
			if err := sys.Unmap(b); err != nil {
				t.Fatal(err)
			}
			return false
		}
		held = append(held, b)
		return true
	})
	if runs < 2 {
		t.Errorf("Take ran the attempt %d times, want a second run after the page was taken", runs)
	}
}

// TestGrowRestoresPoolWhilePagesAreHeld: a page Grow added that a process
// still holds at the restore stays in the pool as a surplus page, which
// nr_hugepages counts. Grow read nr_hugepages for the size to put back, so
// a second Grow while the page was held restored the pool one page bigger
// than it had been: once let go, the page stayed in the pool, free, for
// later tests (and engines) to find. Grow must put back the pool's own
// size, without its surplus pages.
func TestGrowRestoresPoolWhilePagesAreHeld(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change the hugetlb pool")
	}
	size := sys.HugePageSize()
	if _, err := os.Stat(poolPath(size)); err != nil {
		t.Skipf("no hugetlb pool of sys.HugePageSize(): %v", err)
	}
	before := persistentPages(t, size)
	var held []byte
	r := grow(t, nil, func(p *Pool) {
		p.Take(func() bool {
			b, kind, err := sys.MapAnon(size, true)
			if err != nil {
				p.t.Fatal(err)
			}
			if kind != sys.PageHuge {
				sys.Unmap(b)
				return false
			}
			held = b
			return true
		})
	})
	if r.skipped || r.failed {
		t.Skipf("no hugetlb page to hold: skipped %v, failed %v (%s)", r.skipped, r.failed, r.msg)
	}
	r = grow(t, nil, nil)
	if err := sys.Unmap(held); err != nil {
		t.Fatal(err)
	}
	if r.skipped || r.failed {
		t.Fatalf("second Grow: skipped %v, failed %v (%s)", r.skipped, r.failed, r.msg)
	}
	if got := persistentPages(t, size); got != before {
		t.Errorf("pool of %d pages after two Grows and a page held across them, want %d as before", got, before)
	}
}

// persistentPages is the size of the pool of size-byte pages without its
// surplus pages, read while no test process grows it.
func persistentPages(t *testing.T, size int) int {
	t.Helper()
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "spindle-hugetlb.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	p := &Pool{t: t, dir: poolDir(size)}
	return p.read("nr_hugepages") - p.read("surplus_hugepages")
}

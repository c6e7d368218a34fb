package hugetlb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// pools holds the hugetlb pools, one directory per page size. A variable
// for the tests.
var pools = "/sys/kernel/mm/hugepages"

// poolDir is the directory of the pool of size-byte pages.
func poolDir(size int) string {
	return filepath.Join(pools, fmt.Sprintf("hugepages-%dkB", size>>10))
}

// poolPath is the file that holds the size of the pool of size-byte pages.
func poolPath(size int) string {
	return filepath.Join(poolDir(size), "nr_hugepages")
}

// tries is how many times Take runs its attempt.
const tries = 5

// Pool is a hugetlb pool grown by Grow for one test, which holds it (no
// other test process grows it) until the test's cleanup.
type Pool struct {
	t   testing.TB
	dir string
	n   int
}

// Grow makes n pages of size bytes free in their hugetlb pool for the test
// (the pool sys.MapAnon maps from is sys.HugePageSize()'s, whatever the
// host's default huge page size): exactly n, neither reserved nor in use,
// growing or shrinking the pool, and puts the pool's size back at cleanup.
// It skips the test when the process is not root, when the kernel has no
// pool of that size, when the pool cannot be changed (sysfs read-only, as
// in containers, or the write refused) or when it did not grow (memory too
// fragmented). Test processes that grow the pool take turns (a lock file
// held from Grow to cleanup): go test runs packages in parallel, and two
// of them restoring the size each read before the other grew it left the
// pool grown. Other processes may still take the free pages (see Take).
// Call it once per test, from the test's goroutine.
func Grow(t testing.TB, size, n int) *Pool {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to change the hugetlb pool")
	}
	p := &Pool{t: t, dir: poolDir(size), n: n}
	if _, err := os.Stat(poolPath(size)); errors.Is(err, os.ErrNotExist) {
		t.Skipf("no hugetlb pool of %d kB pages (kernel without CONFIG_HUGETLBFS or pages of that size): %v", size>>10, err)
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "spindle-hugetlb.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		lock.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() }) // registered first: runs last, after the restore
	// The pool's own size: nr_hugepages also counts surplus pages, which
	// pages in use become when the pool shrinks under them (a page
	// another test grew, restored while an engine held it). Those leave
	// the pool when let go; put back as part of the size, they stayed.
	old := []byte(strconv.Itoa(p.read("nr_hugepages") - p.read("surplus_hugepages")))
	t.Cleanup(func() {
		if err := os.WriteFile(p.path("nr_hugepages"), old, 0); err != nil {
			t.Errorf("restore %s: %v", p.path("nr_hugepages"), err)
		}
	})
	p.setFree()
	return p
}

// Take runs attempt, which maps memory from the pool, reports whether it
// got its hugetlb pages and, where it did not, releases what it mapped.
// Other processes map hugetlb memory whenever the pool has free pages (go
// test runs two packages' test binaries at a time, and engines put their
// buffers on hugetlb pages), and one may take a page between Grow and the
// test's own mapping: the lock only keeps other tests from resizing the
// pool. So before each run Take makes the pool's n pages free again, and
// it runs attempt up to 5 times before it fails the test with the pool's
// counts at each run. Call it from the test's goroutine; attempt may fail
// or skip the test.
func (p *Pool) Take(attempt func() bool) {
	p.t.Helper()
	var seen []string
	for range tries {
		if !p.setFree() {
			seen = append(seen, "another process took a page as the pool grew: "+p.counts())
			continue
		}
		seen = append(seen, p.counts())
		if attempt() {
			return
		}
	}
	p.t.Fatalf("no hugetlb pages for the test in %d runs, with the pool before each (%s):\n%s", tries, p.dir, strings.Join(seen, "\n"))
}

// setFree resizes the pool so that p.n of its pages are free and not
// reserved, and reports whether they are: another process may have taken
// one meanwhile. It skips the test where the pool cannot be changed or
// did not grow.
func (p *Pool) setFree() bool {
	p.t.Helper()
	nr := p.read("nr_hugepages")
	want := nr + p.n - (p.read("free_hugepages") - p.read("resv_hugepages"))
	if err := os.WriteFile(p.path("nr_hugepages"), []byte(strconv.Itoa(want)), 0); err != nil {
		if errors.Is(err, unix.EROFS) || errors.Is(err, os.ErrPermission) {
			p.t.Skipf("cannot change the hugetlb pool: %v", err)
		}
		p.t.Fatal(err)
	}
	if got := p.read("nr_hugepages"); got < want {
		p.t.Skipf("hugetlb pool did not grow to %d pages (memory too fragmented): %d", want, got)
	}
	return p.read("free_hugepages")-p.read("resv_hugepages") == p.n
}

// counts is the pool's counts, for messages.
func (p *Pool) counts() string {
	var s []string
	for _, f := range []string{"nr_hugepages", "free_hugepages", "resv_hugepages", "surplus_hugepages"} {
		s = append(s, fmt.Sprintf("%s %d", f, p.read(f)))
	}
	return strings.Join(s, ", ")
}

// path is the pool's file named f.
func (p *Pool) path(f string) string { return filepath.Join(p.dir, f) }

// read returns the number in the pool's file named f.
func (p *Pool) read(f string) int {
	p.t.Helper()
	b, err := os.ReadFile(p.path(f))
	if err != nil {
		p.t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		p.t.Fatalf("%s: %v", p.path(f), err)
	}
	return n
}

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

// poolPath is the file that holds the size of the pool of size-byte pages.
func poolPath(size int) string {
	return filepath.Join(pools, fmt.Sprintf("hugepages-%dkB", size>>10), "nr_hugepages")
}

// Grow adds n pages of size bytes to their hugetlb pool for the test (the
// pool sys.MapAnon maps from is sys.HugePageSize()'s, whatever the host's
// default huge page size) and puts the pool's size back at cleanup. It
// skips the test when the process is not root, when the kernel has no
// pool of that size, when the pool cannot be
// changed (sysfs read-only, as in containers, or the write refused) or
// when it did not grow (memory too fragmented). Test
// processes that grow the pool take turns (a lock file held from Grow to
// cleanup): go test runs packages in parallel, and two of them restoring
// the size each read before the other grew it left the pool grown. Call it
// once per test, from the test's goroutine.
func Grow(t testing.TB, size, n int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to change the hugetlb pool")
	}
	path := poolPath(size)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
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
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(old)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(cur+n)), 0); err != nil {
		if errors.Is(err, unix.EROFS) || errors.Is(err, os.ErrPermission) {
			t.Skipf("cannot change the hugetlb pool: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(path, old, 0); err != nil {
			t.Errorf("restore %s: %v", path, err)
		}
	})
	got, _ := os.ReadFile(path)
	if g, _ := strconv.Atoi(strings.TrimSpace(string(got))); g < cur+n {
		t.Skipf("hugetlb pool did not grow to %d (memory too fragmented): %d", cur+n, g)
	}
}

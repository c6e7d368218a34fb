package hugetlb

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// path is the sysctl holding the size of the default hugetlb pool.
const path = "/proc/sys/vm/nr_hugepages"

// Grow adds n pages to the hugetlb pool for the test and restores
// vm.nr_hugepages at cleanup. It skips the test when the process is not root
// or when the pool did not grow (memory too fragmented). Call it from the
// test's goroutine.
func Grow(t testing.TB, n int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to change vm.nr_hugepages")
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(old)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(cur+n)), 0); err != nil {
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

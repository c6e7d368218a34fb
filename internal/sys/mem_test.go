package sys

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHugePageSizeAt reads the huge page size from captured host files
// (found in review: it was fixed at 2 MiB, while arm64 with 64 KiB base
// pages has 512 MiB ones): the PMD size wins over a default hugetlb size of
// 1 GiB, the default hugetlb size counts where there is no THP, and 2 MiB
// is what is left.
func TestHugePageSizeAt(t *testing.T) {
	for _, tt := range []struct {
		host string
		want int
	}{
		{"amd64-1g-default", 2 << 20},
		{"arm64-64k", 512 << 20},
		{"no-thp", 16 << 20},
		{"bad-pmd", 32 << 20},
		{"none", 2 << 20},
	} {
		if got := HugePageSizeAt(filepath.Join("testdata/hugepagesize", tt.host)); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.host, got, tt.want)
		}
	}
}

// TestHugePageSizeHost checks HugePageSize on this host against its PMD
// size, where the kernel has transparent huge pages.
func TestHugePageSizeHost(t *testing.T) {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
	if err != nil {
		t.Skipf("no transparent huge pages: %v", err)
	}
	want, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if got := HugePageSize(); got != want {
		t.Errorf("HugePageSize() = %d, want the PMD size %d", got, want)
	}
}

func FuzzHugePageSizeAt(f *testing.F) {
	f.Add("2097152\n", "Hugepagesize:    1048576 kB\n")
	f.Add("x", "Hugepagesize: 4 kB\n")
	f.Fuzz(func(t *testing.T, pmd, meminfo string) {
		root := t.TempDir()
		thp := filepath.Join(root, "sys/kernel/mm/transparent_hugepage")
		if err := os.MkdirAll(thp, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(thp, "hpage_pmd_size"), []byte(pmd), 0o644)
		os.WriteFile(filepath.Join(root, "proc/meminfo"), []byte(meminfo), 0o644)
		n := HugePageSizeAt(root)
		if n < os.Getpagesize() || n&(n-1) != 0 {
			t.Fatalf("HugePageSizeAt(%q, %q) = %d: not a power of two of at least a page", pmd, meminfo, n)
		}
	})
}

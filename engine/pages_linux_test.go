package engine

import (
	"runtime"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/hugetlb"
	"github.com/spindlenet/spindle/internal/sys"
)

// TestSlabRegionOnBigHugePages maps a send slab region as on a host whose
// huge pages are bigger than a region (arm64 with 64 KiB base pages: 512
// MiB). The region must stay on base pages, its own size: MapAnon rounds a
// huge request up to a whole huge page (since HugePageSize is the host's),
// so each 2 MiB region took 512 MiB, all of it backed at the first touch
// where transparent huge pages are on. On this host's own huge page size
// the region still gets huge pages, also when it is a little smaller (699
// buffers of 3000 bytes).
func TestSlabRegionOnBigHugePages(t *testing.T) {
	if sys.HugePageSize() != regionSize {
		t.Skipf("huge pages of %d bytes, not a slab region's %d", sys.HugePageSize(), regionSize)
	}
	for _, n := range []int{regionSize, regionSize / 3000 * 3000} {
		b, kind, err := mapMem(n, true)
		if err != nil {
			t.Fatal(err)
		}
		unmapMem(b)
		if kind == sys.PageSmall.String() {
			if n == regionSize {
				t.Skipf("a %d-byte huge mapping got %s pages: no huge pages on this host to leave out", n, kind)
			}
			t.Errorf("a %d-byte slab region got %s pages, want huge ones as a whole region's", n, kind)
		}
	}
	old := hugePageSize
	hugePageSize = func() int { return 512 << 20 }
	t.Cleanup(func() { hugePageSize = old })
	b, kind, err := mapMem(regionSize, true)
	if err != nil {
		t.Fatal(err)
	}
	defer unmapMem(b)
	if cap(b) != regionSize || kind != sys.PageSmall.String() {
		t.Errorf("a %d-byte region with 512 MiB huge pages: %d bytes mapped on %s pages, want %d on %s", regionSize, cap(b), kind, regionSize, sys.PageSmall)
	}
}

// TestNoHugePages: with Config.NoHugePages every buffer stays on base
// pages, the uring backends' receive ring as well as the send slab. The
// ring was mapped for huge pages whenever it is at least a huge page
// (512 buffers of 16 KiB by default): MAP_HUGETLB where the host's pool
// has pages, else MADV_HUGEPAGE, so BufferPages said "thp (receive
// ring), 4k (send slab)" on a host with transparent huge pages.
func TestNoHugePages(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			cfg.NoHugePages = true
			e, _ := startEngine(t, cfg, &echoHandler{})
			waitFor(t, "the loops to start", func() bool { return e.BufferPages() != "" })
			if p := e.BufferPages(); strings.Contains(p, sys.PageTHP.String()) || strings.Contains(p, sys.PageHuge.String()) {
				t.Errorf("NoHugePages: buffers on %q", p)
			}
		})
	}
}

// TestBufferPagesEveryLoop: with one hugetlb page for two loops' send
// slabs (epoll: their only buffers), one loop's slab gets it and the
// other's falls back to transparent huge pages or base pages. BufferPages
// (and Run's start-up line) said the first loop's kind alone, as if every
// loop's buffers were on it: "hugetlb" with half of them not, or the
// fallback with the hugetlb page in use. It must name each kind in use.
func TestBufferPagesEveryLoop(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for 2 loops")
	}
	if sys.HugePageSize() != regionSize {
		t.Skipf("huge pages of %d bytes, not a slab region's %d", sys.HugePageSize(), regionSize)
	}
	// Another process may take the page before the loops map their
	// slabs: both loops then fall back and Take starts them again.
	hugetlb.Grow(t, sys.HugePageSize(), 1).Take(func() bool {
		mixed := false
		t.Run("loops", func(t *testing.T) {
			cfg := testConfig(BackendEpoll)
			cfg.CPUs = []int{0, 1}
			e, _ := startEngine(t, cfg, &echoHandler{})
			waitFor(t, "the loops to start", func() bool {
				for _, l := range e.Loops() {
					if loopPages(l) == "" {
						return false
					}
				}
				return true
			})
			kinds := map[string]bool{}
			for _, l := range e.Loops() {
				kinds[loopPages(l)] = true
			}
			if mixed = kinds[sys.PageHuge.String()] && len(kinds) == 2; !mixed {
				t.Logf("the loops' slabs on %v: want the one hugetlb page used, and another kind", kinds)
				return
			}
			got := e.BufferPages()
			for k := range kinds {
				if !strings.Contains(got, k) {
					t.Errorf("BufferPages %q leaves out the loop on %s pages", got, k)
				}
			}
		})
		return mixed
	})
}

// loopPages is l's page kinds, as set at its start. Any goroutine.
func loopPages(l *Loop) string {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return l.pages
}

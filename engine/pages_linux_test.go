package engine

import (
	"testing"

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

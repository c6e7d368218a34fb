package sys

import (
	"errors"
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

var sinkHeap []byte

func TestOffHeap(t *testing.T) {
	page := os.Getpagesize()
	a, _, err := MapAnon(3*page, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := MapAnon(page, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	sinkHeap = make([]byte, 4096)
	var stack [64]byte
	aAddr, bAddr := SliceAddr(a), SliceAddr(b)
	tests := []struct {
		name string
		p, n uint64
		want bool
	}{
		{"whole mapping", aAddr, uint64(3 * page), true},
		{"inside", aAddr + 100, uint64(page), true},
		{"last byte", aAddr + uint64(3*page) - 1, 1, true},
		{"one past the end", aAddr + 1, uint64(3 * page), false},
		{"just before", aAddr - 1, 1, bAddr+uint64(page) == aAddr}, // b may sit right below a
		{"other mapping", bAddr, uint64(page), true},
		{"wrapping length", aAddr, ^uint64(0), false},
		{"Go heap", SliceAddr(sinkHeap), 4096, false},
		{"goroutine stack", SliceAddr(stack[:]), 64, false},
		{"zero length anywhere", SliceAddr(stack[:]), 0, true},
		{"nil", 0, 1, false},
	}
	for _, tt := range tests {
		if got := OffHeap(tt.p, tt.n); got != tt.want {
			t.Errorf("%s: OffHeap(%#x, %d) = %v, want %v", tt.name, tt.p, tt.n, got, tt.want)
		}
	}
	if !OffHeapBytes(a[page:]) || OffHeapBytes(sinkHeap) {
		t.Error("OffHeapBytes disagrees with OffHeap")
	}
	if err := Unmap(a); err != nil {
		t.Fatal(err)
	}
	if OffHeap(aAddr, 1) {
		t.Error("an unmapped range is still reported off-heap")
	}
	if !OffHeap(bAddr, 1) {
		t.Error("unmapping one mapping forgot another")
	}
	if n := testing.AllocsPerRun(100, func() { OffHeap(bAddr, 1) }); n != 0 {
		t.Errorf("OffHeap: %v allocs", n)
	}
}

// TestOffHeapConcurrent maps and unmaps from several goroutines while others
// look up their own live mappings: every lookup of a live mapping succeeds.
func TestOffHeapConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				m, _, err := MapAnon(4096, false)
				if err != nil {
					errs <- err.Error()
					return
				}
				if !OffHeapBytes(m) {
					errs <- "live mapping not found"
				}
				if err := Unmap(m); err != nil {
					errs <- err.Error()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestUnmapPartRefused checks that Unmap takes only a whole mapping from
// MapAnon (its start and its capacity): a slice of its second page, or of
// its first page only, is refused with EINVAL, unmapping nothing, and the
// mapping stays recorded for OffHeap until Unmap of the whole. Unmap took
// either: of the second page it unmapped that page while OffHeap went on
// vouching for it (a later mapping there, even the Go heap's, would pass);
// of the first it unmapped that page and forgot the whole mapping, its
// second page left mapped for good. A second Unmap of a mapping is refused
// the same way, instead of unmapping whatever a later mmap put there.
func TestUnmapPartRefused(t *testing.T) {
	page := os.Getpagesize()
	a, _, err := MapAnon(2*page, false)
	if err != nil {
		t.Fatal(err)
	}
	live := LiveMappings()
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"second page", a[page:]},
		{"first page", a[:page:page]},
	} {
		if err := Unmap(c.b); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Unmap of the %s: %v, want EINVAL", c.name, err)
		}
	}
	if !OffHeapBytes(a[:2*page]) || LiveMappings() != live {
		t.Fatalf("after refused Unmaps: OffHeap %v, %d mappings recorded, want the whole mapping and %d", OffHeapBytes(a[:2*page]), LiveMappings(), live)
	}
	a[0], a[2*page-1] = 1, 2 // both pages still mapped
	if err := Unmap(a); err != nil {
		t.Fatal(err)
	}
	if OffHeap(SliceAddr(a), 1) || LiveMappings() != live-1 {
		t.Error("the mapping is still recorded after Unmap")
	}
	if err := Unmap(a); !errors.Is(err, unix.EINVAL) {
		t.Errorf("second Unmap: %v, want EINVAL", err)
	}
}

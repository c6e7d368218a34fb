package sys

import (
	"os"
	"sync"
	"testing"
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

package sys

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
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

// TestOffHeapWhileMapping checks lookups while other goroutines map and
// unmap: mappings held throughout are found and the Go heap refused on
// every lookup; goroutines mapping and unmapping with MapAnon find their
// live mappings; and goroutines recording and forgetting spans of their own
// in kernel address space, where no mmap can place a mapping and no other
// goroutine records one, find each while it is recorded and never after it
// is forgotten. Several of those spans share a 2 MiB granule and so a slot
// of the hint table, and one fills a granule alone: the hints have to
// follow them.
func TestOffHeapWhileMapping(t *testing.T) {
	var held [][]byte
	for _, n := range []int{4096, 3 * 4096, 2 << 20} {
		m, _, err := MapAnon(n, false)
		if err != nil {
			t.Fatal(err)
		}
		defer Unmap(m)
		held = append(held, m)
	}
	sinkHeap = make([]byte, 4096)
	var stop atomic.Bool
	var checkers, wg sync.WaitGroup
	errs := make(chan string, 16)
	fail := func(format string, args ...any) {
		select {
		case errs <- fmt.Sprintf(format, args...):
		default:
		}
	}
	for range 2 {
		checkers.Add(1)
		go func() {
			defer checkers.Done()
			for !stop.Load() {
				for _, m := range held {
					if !OffHeapBytes(m) || !OffHeapBytes(m[len(m)-1:]) {
						fail("held mapping at %#x not found", SliceAddr(m))
						return
					}
				}
				if OffHeapBytes(sinkHeap) {
					fail("Go heap found off-heap")
					return
				}
			}
		}()
	}
	for g := range 2 { // MapAnon and Unmap
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				m, _, err := MapAnon((g+i%5+1)*4096, false)
				if err != nil {
					fail("%v", err)
					return
				}
				if !OffHeapBytes(m) {
					fail("live mapping at %#x not found", SliceAddr(m))
				}
				if err := Unmap(m); err != nil {
					fail("%v", err)
					return
				}
			}
		}()
	}
	// Kernel address space: the top GiB, 64 MiB to a goroutine.
	top := uint64(^uintptr(0)) &^ (1<<30 - 1)
	for g := range 2 { // addSpan and removeSpan
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := top + uint64(g)<<26
			for i := range 2000 {
				// Four 4 KiB spans in one granule, then one of 2 MiB.
				start := uintptr(base + uint64(i%4)*4096)
				size := uintptr(4096)
				if i%5 == 4 {
					start, size = uintptr(base+1<<21), 2<<20
				}
				addSpan(start, size)
				if !OffHeap(uint64(start), uint64(size)) {
					fail("recorded span %#x+%d not found", start, size)
				}
				if !removeSpan(start, size) {
					fail("recorded span %#x+%d not removed", start, size)
					return
				}
				if OffHeap(uint64(start), 1) || OffHeap(uint64(start+size-1), 1) {
					fail("forgotten span %#x+%d still found", start, size)
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	checkers.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
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

// BenchmarkOffHeap looks up the memory a loop hands the kernel for each
// request, a chunk of its send slab and its arena's timespec, among the
// mappings of six loops (three engines of two), each a ring's scratch
// arena, a buffer ring's slab and ring of entries, and a send slab region:
// 24 spans, the slabs of 2 MiB on huge pages as the engine asks by default.
// "loop" is one loop's lookups; "loops" runs as many loops as GOMAXPROCS
// at once, each on its own mappings, as the engine's loops do. Both report
// cpu-ns/op, the thread CPU time of a request (the goroutine is locked to
// its thread), which leaves out the time other processes held the CPU, as
// wall-clock time on a busy host does not.
func BenchmarkOffHeap(b *testing.B) {
	const loops = 6
	type loopMem struct{ arena, slab, entries, send []byte }
	mems := make([]loopMem, loops)
	mapped := func(n int, huge bool) []byte {
		m, _, err := MapAnon(n, huge)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { Unmap(m) })
		return m
	}
	for i := range mems {
		mems[i] = loopMem{mapped(4096, false), mapped(2<<20, true), mapped(4096, false), mapped(2<<20, true)}
	}
	// requests runs loop l's requests while next says so, each looking up
	// a 16 KiB chunk of the loop's send slab, in turn, and its arena's
	// timespec, and returns the CPU time its thread spent and their
	// number. A lookup that does not find its memory fails b.
	requests := func(b *testing.B, l int, next func() bool) (cpu int64, n int) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		send, ts := SliceAddr(mems[l].send), SliceAddr(mems[l].arena)+64
		start := ThreadCPUTime()
		for ; next(); n++ {
			if !OffHeap(send+uint64(n%128)<<14, 1400) || !OffHeap(ts, 16) {
				b.Errorf("loop %d: memory not found", l)
				break
			}
		}
		return ThreadCPUTime() - start, n
	}
	b.Run("loop", func(b *testing.B) {
		b.ReportAllocs()
		cpu, n := requests(b, 0, b.Loop)
		b.ReportMetric(float64(cpu)/float64(max(n, 1)), "cpu-ns/op")
	})
	b.Run("loops", func(b *testing.B) {
		b.ReportAllocs()
		var next atomic.Int32
		var cpu, n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			c, k := requests(b, int(next.Add(1)-1)%loops, pb.Next)
			cpu.Add(c)
			n.Add(int64(k))
		})
		b.ReportMetric(float64(cpu.Load())/float64(max(n.Load(), 1)), "cpu-ns/op")
	})
}

package sys

import (
	"slices"
	"sync"
	"sync/atomic"
)

// The kernel may read or write memory named in an SQE long after the system
// call that submitted it returned. Go heap memory can be freed while the
// kernel still uses it, and goroutine stacks move when they grow, so such
// memory must come from MapAnon. MapAnon records every mapping it makes here,
// and OffHeap lets package uring refuse any other address before it reaches
// an SQE.

// span is one live mapping: [start, end).
type span struct{ start, end uintptr }

// The hint table of a spanSet sorts addresses into granules of
// 1<<granuleShift bytes, 2 MiB, the size and alignment of a huge page on
// amd64 and of the engine's slabs (2 MiB regions on huge pages by default),
// and granules into hintSlots slots, the slot of a granule its number modulo
// hintSlots: a window of 2 GiB before two granules share a slot.
const (
	granuleShift = 21
	hintSlots    = 1024
)

// spanSet is the published list of live mappings. It is never modified once
// published: OffHeap reads it without a lock, and a writer publishes a new
// one.
type spanSet struct {
	s []span // sorted by start; mappings never overlap
	// hint[k] is 1 + the index in s of the lowest span covering a granule
	// of slot k, or 0 for none: a slab that fills its granule alone is
	// named there, and small mappings sharing a granule by the lowest of
	// them. A span wider than hintSlots granules takes no slot, so that a
	// big mapping does not push every other span out. A hint is only a
	// place to look first (contains checks the span it names like any
	// other) and a bound for the search: when the span it names starts at
	// or below an address, only it and the spans after it in s can hold
	// the address.
	hint [hintSlots]uint32
}

// newSpanSet returns the set of the sorted spans s, its hints filled in.
func newSpanSet(s []span) *spanSet {
	set := &spanSet{s: s}
	for i, sp := range s {
		first, last := sp.start>>granuleShift, (sp.end-1)>>granuleShift
		if last-first >= hintSlots {
			continue
		}
		for g := first; g <= last; g++ {
			if k := g % hintSlots; set.hint[k] == 0 {
				set.hint[k] = uint32(i) + 1
			}
		}
	}
	return set
}

// contains is OffHeap for the spans of set (nil for none). It looks first
// at the span the hint of p's granule names, which covers p in the common
// case, then searches the spans from there (all of them if the hint lies
// above p).
func (set *spanSet) contains(p, n uint64) bool {
	if n == 0 {
		return true
	}
	if set == nil || p+n < p {
		return false
	}
	s := set.s
	lo, hi := 0, len(s)
	if h := int(set.hint[(p>>granuleShift)%hintSlots]); h != 0 && h <= len(s) && uint64(s[h-1].start) <= p {
		if p+n <= uint64(s[h-1].end) {
			return true
		}
		lo = h
	}
	// The last span starting at or below p is the only candidate; s[lo-1]
	// starts at or below it.
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if uint64(s[m].start) <= p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo > 0 && p+n <= uint64(s[lo-1].end)
}

var (
	spansMu sync.Mutex              // serialises writers
	spans   atomic.Pointer[spanSet] // nil until the first mapping
)

// liveSpans returns the published spans (nil for none). Callers hold spansMu.
func liveSpans() []span {
	if set := spans.Load(); set != nil {
		return set.s
	}
	return nil
}

// addSpan records a mapping. Safe for concurrent use.
func addSpan(start, size uintptr) {
	spansMu.Lock()
	defer spansMu.Unlock()
	cur := liveSpans()
	i, _ := slices.BinarySearchFunc(cur, start, func(s span, start uintptr) int {
		switch {
		case s.start < start:
			return -1
		case s.start > start:
			return 1
		}
		return 0
	})
	spans.Store(newSpanSet(slices.Insert(slices.Clone(cur), i, span{start, start + size})))
}

// removeSpan forgets the mapping [start, start+size) and reports whether it
// was recorded, as a whole: a part of one, or a range recorded no more, is
// left alone. Safe for concurrent use.
func removeSpan(start, size uintptr) bool {
	spansMu.Lock()
	defer spansMu.Unlock()
	cur := liveSpans()
	i := slices.Index(cur, span{start, start + size})
	if i < 0 {
		return false
	}
	spans.Store(newSpanSet(slices.Delete(slices.Clone(cur), i, i+1)))
	return true
}

// OffHeap reports whether the n bytes at address p lie inside one live
// mapping made by MapAnon (and so off the Go heap and off every goroutine
// stack). n == 0 is always true: the kernel touches nothing. It does not
// allocate. Safe for concurrent use.
func OffHeap(p, n uint64) bool {
	return spans.Load().contains(p, n)
}

// OffHeapBytes is OffHeap for the bytes of b.
func OffHeapBytes(b []byte) bool {
	return OffHeap(SliceAddr(b), uint64(len(b)))
}

// LiveMappings returns how many MapAnon mappings are not unmapped yet, for
// leak checks in tests. Safe for concurrent use.
func LiveMappings() int {
	if set := spans.Load(); set != nil {
		return len(set.s)
	}
	return 0
}

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

var (
	spansMu sync.Mutex             // serialises writers
	spans   atomic.Pointer[[]span] // sorted by start; never modified once published
)

// addSpan records a mapping. Safe for concurrent use.
func addSpan(start, size uintptr) {
	spansMu.Lock()
	defer spansMu.Unlock()
	var cur []span
	if p := spans.Load(); p != nil {
		cur = *p
	}
	i, _ := slices.BinarySearchFunc(cur, start, func(s span, start uintptr) int {
		switch {
		case s.start < start:
			return -1
		case s.start > start:
			return 1
		}
		return 0
	})
	next := slices.Insert(slices.Clone(cur), i, span{start, start + size})
	spans.Store(&next)
}

// removeSpan forgets the mapping [start, start+size) and reports whether it
// was recorded, as a whole: a part of one, or a range recorded no more, is
// left alone. Safe for concurrent use.
func removeSpan(start, size uintptr) bool {
	spansMu.Lock()
	defer spansMu.Unlock()
	p := spans.Load()
	if p == nil {
		return false
	}
	i := slices.Index(*p, span{start, start + size})
	if i < 0 {
		return false
	}
	next := slices.Delete(slices.Clone(*p), i, i+1)
	spans.Store(&next)
	return true
}

// OffHeap reports whether the n bytes at address p lie inside one live
// mapping made by MapAnon (and so off the Go heap and off every goroutine
// stack). n == 0 is always true: the kernel touches nothing. It does not
// allocate. Safe for concurrent use.
func OffHeap(p, n uint64) bool {
	if n == 0 {
		return true
	}
	sp := spans.Load()
	if sp == nil {
		return false
	}
	s := *sp
	// The last span starting at or below p is the only candidate.
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if uint64(s[m].start) <= p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return false
	}
	c := s[lo-1]
	return p+n >= p && p+n <= uint64(c.end)
}

// OffHeapBytes is OffHeap for the bytes of b.
func OffHeapBytes(b []byte) bool {
	return OffHeap(SliceAddr(b), uint64(len(b)))
}

// LiveMappings returns how many MapAnon mappings are not unmapped yet, for
// leak checks in tests. Safe for concurrent use.
func LiveMappings() int {
	if p := spans.Load(); p != nil {
		return len(*p)
	}
	return 0
}

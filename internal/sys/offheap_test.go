package sys

import (
	"encoding/binary"
	"testing"
)

// FuzzSpanSetContains checks the hinted lookup of a spanSet against a scan
// of all its spans, on layouts drawn from the input: spans of pages, of 64
// KiB, of 2 MiB granules and of 1 GiB (wider than the hint table, or
// sharing slots with spans 2 GiB away), with gaps of the same units, and
// lookups at the edges of each span and at addresses from the input.
func FuzzSpanSetContains(f *testing.F) {
	f.Add(uint64(0x7f0000000000), []byte{0, 0, 1, 0, 2, 0, 1, 1, 0, 2, 0, 0}, uint64(0x10000), uint64(1))
	f.Add(uint64(0x7f0000001000), []byte{3, 0, 2, 3, 0, 0, 0, 0, 0, 2, 5, 1, 2, 0, 0, 0, 0, 0}, uint64(0x7f00c0000000), uint64(4096))
	f.Add(uint64(0x7f0000200000), []byte{2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0}, uint64(0x7f0000600000), uint64(1))
	f.Add(uint64(0x10000), []byte{1, 255, 255, 3, 1, 1, 0, 200, 3}, uint64(0), uint64(1<<40))
	units := []uint64{4096, 64 << 10, 1 << granuleShift, 1 << 30}
	f.Fuzz(func(t *testing.T, base uint64, layout []byte, p, n uint64) {
		// Page-aligned, as mmap's are, and below 2^47 so that no span
		// ends past the top of a 64-bit address space.
		addr := base % (1 << 47) &^ 4095
		var s []span
		for ; len(layout) >= 3; layout = layout[3:] {
			unit := units[layout[0]%4]
			start := addr + uint64(layout[1])*unit
			end := start + (uint64(layout[2])+1)*unit
			if end > 1<<47 || uint64(uintptr(end)) != end {
				break
			}
			s = append(s, span{uintptr(start), uintptr(end)})
			addr = end
		}
		set := newSpanSet(s)
		in := func(p, n uint64) bool {
			for _, sp := range s {
				if uint64(sp.start) <= p && p+n >= p && p+n <= uint64(sp.end) {
					return true
				}
			}
			return false
		}
		check := func(p, n uint64) {
			if n == 0 {
				return
			}
			if got, want := set.contains(p, n), in(p, n); got != want {
				t.Fatalf("contains(%#x, %d) = %v, want %v (spans %#x)", p, n, got, want, s)
			}
		}
		check(p, n)
		check(binary.LittleEndian.Uint64(append(layout, make([]byte, 8)...)), n)
		for _, sp := range s {
			start, end := uint64(sp.start), uint64(sp.end)
			check(start, end-start)
			check(start, end-start+1)
			check(start-1, 1)
			check(end-1, 1)
			check(end, 1)
			check(start+(end-start)/2, 4096)
		}
	})
}

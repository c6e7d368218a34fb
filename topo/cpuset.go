package topo

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/spindlenet/spindle/internal/cpulist"
)

// MaxCPU bounds the CPU numbers the parsers accept, so that a corrupt or
// hostile file cannot make a CPU list allocate without limit. Linux's
// NR_CPUS maximum is 8192.
const MaxCPU = cpulist.Max

// CPUSet is a sorted set of CPU numbers without duplicates. The zero value
// is the empty set. It marshals to JSON as a kernel CPU list ("0-3,8").
// Its methods do not modify it and may be called from any goroutine.
type CPUSet []int

// NewCPUSet returns the set of the given CPUs, sorted and deduplicated.
func NewCPUSet(cpus ...int) CPUSet {
	s := slices.Clone(cpus)
	slices.Sort(s)
	return CPUSet(slices.Compact(s))
}

// ParseCPUList parses a kernel CPU list such as "0-3,8,10-11" (also the
// stride form "0-15:2/4" is not accepted: the kernel never prints it).
// Surrounding white space is ignored; an empty string is the empty set.
func ParseCPUList(s string) (CPUSet, error) {
	cpus, err := cpulist.Parse(s)
	if err != nil {
		return nil, err
	}
	if cpus == nil {
		return CPUSet{}, nil
	}
	return CPUSet(cpus), nil
}

// ParseCPUMask parses a kernel hexadecimal CPU mask as found in rps_cpus,
// xps_cpus and smp_affinity: 32-bit groups separated by commas, most
// significant group first ("00000000,00000003").
func ParseCPUMask(s string) (CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return CPUSet{}, nil
	}
	groups := strings.Split(s, ",")
	if len(groups)*32 > MaxCPU {
		return nil, fmt.Errorf("cpu mask %q: too many groups", s)
	}
	var out []int
	for i, g := range groups {
		if g == "" || len(g) > 8 {
			return nil, fmt.Errorf("cpu mask %q: bad group %q", s, g)
		}
		v, err := strconv.ParseUint(g, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("cpu mask %q: bad group %q", s, g)
		}
		base := (len(groups) - 1 - i) * 32
		for v != 0 {
			b := bits.TrailingZeros64(v)
			out = append(out, base+b)
			v &^= 1 << b
		}
	}
	return NewCPUSet(out...), nil
}

// Contains reports whether cpu is in the set.
func (s CPUSet) Contains(cpu int) bool {
	_, ok := slices.BinarySearch(s, cpu)
	return ok
}

// Len returns the number of CPUs in the set.
func (s CPUSet) Len() int { return len(s) }

// Union returns the CPUs in s or t.
func (s CPUSet) Union(t CPUSet) CPUSet { return NewCPUSet(append(slices.Clone(s), t...)...) }

// Intersect returns the CPUs in both s and t.
func (s CPUSet) Intersect(t CPUSet) CPUSet {
	out := CPUSet{}
	for _, c := range s {
		if t.Contains(c) {
			out = append(out, c)
		}
	}
	return out
}

// Minus returns the CPUs in s that are not in t.
func (s CPUSet) Minus(t CPUSet) CPUSet {
	out := CPUSet{}
	for _, c := range s {
		if !t.Contains(c) {
			out = append(out, c)
		}
	}
	return out
}

// Equal reports whether s and t hold the same CPUs.
func (s CPUSet) Equal(t CPUSet) bool { return slices.Equal(s, t) }

// String formats the set as a kernel CPU list ("0-3,8"); the empty set is "".
func (s CPUSet) String() string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Mask formats the set as a kernel hexadecimal CPU mask: 32-bit groups,
// most significant first, separated by commas, the first group without
// leading zeros ("3", "1,00000000"). The empty set is "0".
func (s CPUSet) Mask() string {
	if len(s) == 0 {
		return "0"
	}
	groups := make([]uint32, s[len(s)-1]/32+1)
	for _, c := range s {
		groups[c/32] |= 1 << (c % 32)
	}
	var b strings.Builder
	for i := len(groups) - 1; i >= 0; i-- {
		if i == len(groups)-1 {
			fmt.Fprintf(&b, "%x", groups[i])
		} else {
			fmt.Fprintf(&b, ",%08x", groups[i])
		}
	}
	return b.String()
}

// MarshalJSON encodes the set as its CPU list string.
func (s CPUSet) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON decodes a CPU list string.
func (s *CPUSet) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	v, err := ParseCPUList(str)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Package cpulist parses the kernel's CPU list format ("0-3,8,10-11"), the
// one parser behind topo.ParseCPUList, bench.ParseCPUList and the engine's
// reading of the CPUs `spindle tune` set aside for loops.
package cpulist

import (
	"fmt"
	"strconv"
	"strings"
)

// Max bounds CPU numbers: the kernel's NR_CPUS limit for x86-64 and arm64
// distribution kernels (8192).
const Max = 8192

// Parse parses a CPU list such as "0-3,8,10-11" into sorted, distinct CPU
// numbers below Max. Surrounding white space is ignored; an empty string
// is the empty set (nil). The stride form "0-15:2/4" is refused: the
// kernel never prints it. Any goroutine.
func Parse(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var seen [Max]bool
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := CPU(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = CPU(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("cpu list %q: range %s is reversed", s, part)
			}
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	var out []int
	for c, ok := range seen {
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// CPU parses one CPU number below Max, surrounding white space ignored.
// Any goroutine.
func CPU(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n >= Max {
		return 0, fmt.Errorf("bad cpu number %q", s)
	}
	return n, nil
}

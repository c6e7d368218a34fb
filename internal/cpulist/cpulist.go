// Package cpulist parses the kernel's CPU list format ("0-3,8,10-11"), the
// one parser behind topo.ParseCPUList, bench.ParseCPUList and the engine's
// reading of the CPUs `spindle tune` set aside for loops.
package cpulist

import (
	"errors"
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
func Parse(s string) ([]int, error) { return parse(s, 0, false) }

// ParseBoot parses a CPU list of the kernel command line (isolcpus=,
// nohz_full=), which takes every form of the kernel's cpu lists
// (Documentation/admin-guide/kernel-parameters.rst, "cpu lists"): Parse's,
// plus "N" for the last CPU, "all" (in any case), and the group form
// "a-b:used/group" (the first used CPUs of every group of group CPUs from a
// to b: "0-7:1/4" is 0,4; used may be 0). As the kernel's parser
// (bitmap_parselist), it skips empty regions ("1,,2" is 1,2). nrCPUs is the kernel's nr_cpu_ids, one more than the last
// possible CPU; CPUs must lie below it, and 0 (unknown) makes "N" and
// "all" errors. Any goroutine.
func ParseBoot(s string, nrCPUs int) ([]int, error) { return parse(s, nrCPUs, true) }

// ErrNoCPUCount is wrapped by ParseBoot's error for "N" or "all" when the
// CPU count is unknown (nrCPUs 0): the list may be one the kernel took.
var ErrNoCPUCount = errors.New("N and all need the CPU count")

// parse is Parse, or with boot ParseBoot.
func parse(s string, nrCPUs int, boot bool) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	limit := Max
	if boot && nrCPUs > 0 && nrCPUs < limit {
		limit = nrCPUs
	}
	num := func(t string) (int, error) {
		if boot && t == "N" {
			if nrCPUs <= 0 {
				return 0, fmt.Errorf("cpu number %q: %w", t, ErrNoCPUCount)
			}
			return limit - 1, nil
		}
		n, err := CPU(t)
		if err == nil && n >= limit {
			err = fmt.Errorf("cpu %d out of range (%d CPUs)", n, limit)
		}
		return n, err
	}
	var seen [Max]bool
	for part := range strings.SplitSeq(s, ",") {
		if boot && part == "" {
			continue
		}
		rng, group, hasGroup := part, "", false
		if boot {
			rng, group, hasGroup = strings.Cut(part, ":")
		}
		var a, b int
		if boot && strings.EqualFold(rng, "all") {
			if nrCPUs <= 0 {
				return nil, fmt.Errorf("cpu list %q: %w", s, ErrNoCPUCount)
			}
			a, b = 0, limit-1
		} else {
			lo, hi, isRange := strings.Cut(rng, "-")
			var err error
			if a, err = num(lo); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
			b = a
			if isRange {
				if b, err = num(hi); err != nil {
					return nil, fmt.Errorf("cpu list %q: %w", s, err)
				}
				if b < a {
					return nil, fmt.Errorf("cpu list %q: range %s is reversed", s, rng)
				}
			}
		}
		used, size := 1, 1
		if hasGroup {
			u, g, ok := strings.Cut(group, "/")
			var err error
			used, err = decimal(u)
			if err == nil {
				size, err = decimal(g)
			}
			if !ok || err != nil || used < 0 || size < 1 || used > size || size > Max {
				return nil, fmt.Errorf("cpu list %q: bad group %q (want used/size, 0 <= used <= size, size >= 1)", s, group)
			}
		}
		for start := a; start <= b; start += size {
			for c := start; c < start+used && c <= b; c++ {
				seen[c] = true
			}
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

// CPU parses one CPU number below Max, surrounding white space ignored:
// decimal digits only, as the kernel's parsers take them (no sign, which
// strconv.Atoi takes). Any goroutine.
func CPU(s string) (int, error) {
	n, err := decimal(strings.TrimSpace(s))
	if err != nil || n >= Max {
		return 0, fmt.Errorf("bad cpu number %q", s)
	}
	return n, nil
}

// decimal parses a number written in decimal digits and nothing else.
func decimal(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a decimal number: %q", s)
	}
	return strconv.Atoi(s)
}

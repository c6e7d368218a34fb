package cpulist

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []int
	}{
		{"", nil},
		{" 0 ", []int{0}},
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}},
		{"3,1,2,1", []int{1, 2, 3}},
		{"8191", []int{8191}},
	} {
		if got, err := Parse(tt.in); err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	// The kernel's parsers (bitmap_parselist, kstrtouint) take no sign.
	for _, bad := range []string{"x", "-1", "3-1", "8192", "0-15:2/4", "1,,2", "1-", "+1", "0-+3", "0, +1"} {
		if got, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", bad, got)
		}
	}
}

// TestCPU: one number in decimal digits, white space around it; no sign,
// which strconv.Atoi takes and the kernel's parsers do not.
func TestCPU(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{{"0", 0}, {" 7\n", 7}, {"007", 7}, {"8191", 8191}} {
		if got, err := CPU(tt.in); err != nil || got != tt.want {
			t.Errorf("CPU(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "+1", "-0", "-1", " +3", "1 2", "0x1", "8192", "99999999999999999999"} {
		if got, err := CPU(bad); err == nil {
			t.Errorf("CPU(%q) = %d, want an error", bad, got)
		}
	}
}

// FuzzParse checks that whatever parses is sorted, distinct, in range and
// parses back to itself from its formatted form.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-3,8", "1,1", "0-8191", " 2 - 4 ", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := Parse(s)
		if err != nil {
			return
		}
		for i, c := range cpus {
			if c < 0 || c >= Max || (i > 0 && c <= cpus[i-1]) {
				t.Fatalf("Parse(%q) = %v: not sorted, distinct and in range", s, cpus)
			}
		}
		parts := make([]string, len(cpus))
		for i, c := range cpus {
			parts[i] = strconv.Itoa(c)
		}
		again, err := Parse(strings.Join(parts, ","))
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("Parse(%q) = %v, but its list parses to %v, %v", s, cpus, again, err)
		}
	})
}

func TestParseBoot(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []int
	}{
		{"2-N", []int{2, 3}},
		{"all", []int{0, 1, 2, 3}},
		{"0-3:1/2", []int{0, 2}},
		{"1,N", []int{1, 3}},
		// The kernel's parser (bitmap_parselist, lib/bitmap-str.c) skips
		// empty regions, takes a group with none used (an empty set) and
		// "all" in any case.
		{"1,,2", []int{1, 2}},
		{",1,", []int{1}},
		{"0-3:0/2", nil},
		{"0-3:0/2,1", []int{1}},
		{"ALL", []int{0, 1, 2, 3}},
	} {
		if got, err := ParseBoot(tt.in, 4); err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseBoot(%q, 4) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"4", "N-1", "0-3:3/2", "0-3:1", "0-3:1/0", "+1", "0, +1", "0-3:+1/2", "0-3:1/+2", "n", "alll"} {
		if got, err := ParseBoot(bad, 4); err == nil {
			t.Errorf("ParseBoot(%q, 4) = %v, want an error", bad, got)
		}
	}
	if _, err := ParseBoot("1-N", 0); err == nil {
		t.Error("N accepted without a CPU count")
	}
}

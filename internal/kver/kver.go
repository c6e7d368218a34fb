// Package kver reads and compares Linux kernel releases, for the feature
// checks and the tests that must fail, not skip, on a kernel new enough to
// have what they test.
package kver

import (
	"strconv"
	"strings"
)

// AtLeast reports whether release (uname -r, e.g. "6.18.44-fc-v669") is at
// least want ("6.9", or "6" for 6.0; only major and minor count). A release
// that does not start with major.minor is older than everything, and no
// release is at least a want that is not a version ("", "v6.1").
func AtLeast(release, want string) bool {
	ra, rb, ok := majorMinor(release)
	if !ok {
		return false
	}
	wa, wb, ok := majorMinor(want)
	if !ok {
		if wa, ok = number(want); !ok {
			return false
		}
		wb = 0
	}
	return ra > wa || ra == wa && rb >= wb
}

// majorMinor parses the leading "major.minor" of a release: digits up to
// the first character that is not one.
func majorMinor(s string) (major, minor int, ok bool) {
	a, rest, found := strings.Cut(s, ".")
	if !found {
		return 0, 0, false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	ma, ok1 := number(a)
	mi, ok2 := number(rest[:end])
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return ma, mi, true
}

// number parses s, decimal digits only.
func number(s string) (int, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

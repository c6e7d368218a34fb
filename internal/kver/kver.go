// Package kver reads and compares Linux kernel releases, for the feature
// checks and the tests that must fail, not skip, on a kernel new enough to
// have what they test.
package kver

import (
	"strconv"
	"strings"
)

// AtLeast reports whether release (uname -r, e.g. "6.18.44-fc-v669") is at
// least want ("6.9"; only major and minor count). A release that does not
// start with major.minor is older than everything.
func AtLeast(release, want string) bool {
	ra, rb, ok := majorMinor(release)
	if !ok {
		return false
	}
	wa, wb, _ := majorMinor(want)
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
	ma, err1 := strconv.Atoi(a)
	mi, err2 := strconv.Atoi(rest[:end])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return ma, mi, true
}

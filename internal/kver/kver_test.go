package kver

import (
	"runtime"
	"testing"
)

func TestAtLeast(t *testing.T) {
	for _, tc := range []struct {
		release, want string
		ok            bool
	}{
		{"6.18.44-fc-v669", "6.9", true},
		{"6.18.44-fc-v669", "6.18", true},
		{"6.18.44-fc-v669", "6.19", false},
		{"6.9", "6.18", false},
		{"7.0-rc1", "6.18", true},
		{"5.15.0-91-generic", "6.1", false},
		{"6.1.0-13-amd64", "6.1", true},
		{"6.10+", "6.9", true},
		{"", "5.1", false},
		{"unknown", "5.1", false},
		{"6", "5.1", false},
		// A want without a minor is major.0; a want that is no version
		// at all is not met (it was met by every release).
		{"5.15.0-91-generic", "6", false},
		{"6.0.1", "6", true},
		{"6.18.44-fc-v669", "", false},
		{"6.18.44-fc-v669", "six", false},
		{"6.18.44-fc-v669", "v6.1", false},
	} {
		if got := AtLeast(tc.release, tc.want); got != tc.ok {
			t.Errorf("AtLeast(%q, %q) = %v, want %v", tc.release, tc.want, got, tc.ok)
		}
	}
}

func TestRelease(t *testing.T) {
	r := Release()
	if runtime.GOOS == "linux" && !AtLeast(r, "2.6") {
		t.Fatalf("Release() = %q, not a Linux release", r)
	}
}

func FuzzAtLeast(f *testing.F) {
	f.Add("6.18.44-fc", "6.9")
	f.Add("6.18.44-fc", "x")
	f.Fuzz(func(t *testing.T, release, want string) {
		if !AtLeast(release, want) {
			return
		}
		if !AtLeast(release, release) {
			t.Fatalf("%q >= %q but not >= itself", release, want)
		}
		// Whatever is met is a version: it starts with a number.
		if want == "" || want[0] < '0' || want[0] > '9' {
			t.Fatalf("%q >= %q, which is not a version", release, want)
		}
	})
}

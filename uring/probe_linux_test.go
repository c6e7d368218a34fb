package uring

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// kernelAtLeast reports whether release (e.g. "6.18.44-fc") is >= want
// ("6.9").
func kernelAtLeast(release, want string) bool {
	parse := func(s string) (int, int) {
		s, _, _ = strings.Cut(s, "-")
		parts := strings.SplitN(s, ".", 3)
		if len(parts) < 2 {
			return 0, 0
		}
		a, _ := strconv.Atoi(parts[0])
		b, _ := strconv.Atoi(parts[1])
		return a, b
	}
	ra, rb := parse(release)
	wa, wb := parse(want)
	return ra > wa || (ra == wa && rb >= wb)
}

func TestKernelAtLeast(t *testing.T) {
	tests := []struct {
		rel, want string
		ok        bool
	}{
		{"6.18.44-fc-v669", "6.9", true},
		{"6.18.44", "6.18", true},
		{"6.8.0-1", "6.9", false},
		{"5.19.0", "6.0", false},
		{"7.0", "6.13", true},
	}
	for _, tt := range tests {
		if got := kernelAtLeast(tt.rel, tt.want); got != tt.ok {
			t.Errorf("kernelAtLeast(%q, %q) = %v", tt.rel, tt.want, got)
		}
	}
}

// TestProbe checks that every feature the running kernel is new enough for
// is reported as supported, except the zero-copy receive opcode family that
// needs NIC support.
func TestProbe(t *testing.T) {
	f, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	if !f.Available || f.Kernel == "" {
		t.Fatalf("Probe: %+v", f)
	}
	if len(f.List) < 40 {
		t.Errorf("only %d features probed", len(f.List))
	}
	for _, x := range f.List {
		if x.MinKernel == "" || x.Name == "" || x.Kind == "" {
			t.Errorf("incomplete feature %+v", x)
		}
		if kernelAtLeast(f.Kernel, x.MinKernel) && !x.Supported {
			t.Errorf("%s (%s, >= %s) unsupported on %s: %s", x.Name, x.Kind, x.MinKernel, f.Kernel, x.Reason)
		}
	}
	for _, name := range []string{FeatNAPI, FeatNAPIStatic, FeatMultishotRecv, FeatMultishotAccept, FeatRecvBundle} {
		if kernelAtLeast(f.Kernel, "6.13") && !f.Has(name) {
			t.Errorf("%s not supported", name)
		}
	}
	if err := f.Err("no such feature"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Err(unknown) = %v", err)
	}
	if err := f.Err(FeatNAPI); err != nil {
		t.Errorf("Err(%s) = %v", FeatNAPI, err)
	}
}

func TestUnsupportedFeatureError(t *testing.T) {
	err := error(&UnsupportedFeatureError{Feature: "IORING_REGISTER_NAPI", MinKernel: "6.9"})
	if !errors.Is(err, ErrNotSupported) {
		t.Error("not ErrNotSupported")
	}
	if got, want := err.Error(), "IORING_REGISTER_NAPI not supported (requires >= 6.9)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestSetupErrorNeeds checks that setupError retries a flag together with
// the flags it needs: COOP_TASKRUN|TASKRUN_FLAG refused with EINVAL is an
// invalid combination on a kernel that has both, not a missing
// IORING_SETUP_TASKRUN_FLAG (which the kernel refuses alone).
func TestSetupErrorNeeds(t *testing.T) {
	if k := kernelRelease(); !kernelAtLeast(k, "5.19") {
		t.Skipf("IORING_SETUP_COOP_TASKRUN not supported (requires >= 5.19, have %s)", k)
	}
	err := setupError(sys.IORING_SETUP_COOP_TASKRUN|sys.IORING_SETUP_TASKRUN_FLAG, unix.EINVAL)
	if errors.Is(err, ErrNotSupported) {
		t.Errorf("setupError = %v, want an invalid combination", err)
	}
}

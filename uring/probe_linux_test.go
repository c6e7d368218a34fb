package uring

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/sys"
)

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
		if kver.AtLeast(f.Kernel, x.MinKernel) && !x.Supported {
			t.Errorf("%s (%s, >= %s) unsupported on %s: %s", x.Name, x.Kind, x.MinKernel, f.Kernel, x.Reason)
		}
	}
	for _, name := range []string{FeatNAPI, FeatNAPIStatic, FeatMultishotRecv, FeatMultishotAccept, FeatRecvBundle} {
		if kver.AtLeast(f.Kernel, "6.13") && !f.Has(name) {
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
	if k := kver.Release(); !kver.AtLeast(k, "5.19") {
		t.Skipf("IORING_SETUP_COOP_TASKRUN not supported (requires >= 5.19, have %s)", k)
	}
	err := setupError(sys.IORING_SETUP_COOP_TASKRUN|sys.IORING_SETUP_TASKRUN_FLAG, unix.EINVAL)
	if errors.Is(err, ErrNotSupported) {
		t.Errorf("setupError = %v, want an invalid combination", err)
	}
}

package main

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/uring"
)

// TestDoctorIOUringDisabledForSome: with kernel.io_uring_disabled 1 the
// kernel lets only processes with CAP_SYS_ADMIN or in
// kernel.io_uring_group create rings. Doctor, run as root, made its rings
// and warned of nothing, where the service it checks for, running as
// another user, falls back to epoll; it now says so. With 0 there is no
// such warning, and where rings could not be made the warning is that
// io_uring is unavailable.
func TestDoctorIOUringDisabledForSome(t *testing.T) {
	all := []uring.Feature{
		{Name: uring.FeatMultishotRecv, Supported: true},
		{Name: uring.FeatMultishotAccept, Supported: true},
		{Name: uring.FeatNAPI, Supported: true},
	}
	for _, tc := range []struct {
		name     string
		f        *uring.Features
		err      error
		contains string // "" for no warning
	}{
		{"disabled 0", &uring.Features{Disabled: 0, Available: true, List: all}, nil, ""},
		{"disabled 1, rings made", &uring.Features{Disabled: 1, Available: true, List: all}, nil, "io_uring_disabled is 1"},
		{"disabled 2", &uring.Features{Disabled: 2}, errors.New("operation not permitted"), "io_uring unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ioUringWarnings(tc.f, tc.err)
			if tc.contains == "" {
				if len(w) > 0 {
					t.Errorf("warnings %q, want none", w)
				}
				return
			}
			if !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, tc.contains) }) {
				t.Errorf("warnings %q, want one saying %q", w, tc.contains)
			}
		})
	}
}

// TestDoctorReadBuffersAboveTheEngineMaxIsAUsageError: engine.LockedMemory's
// errors are a Config that engine.New refuses on any host, never one this
// host refuses, so doctor's --read-buffers past the engine's largest (32768)
// is a usage error (exit 2), found before the host is read.
func TestDoctorReadBuffersAboveTheEngineMaxIsAUsageError(t *testing.T) {
	err := doctor(context.Background(), []string{"--loops", "1", "--read-buffers", "32769"}, io.Discard)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--read-buffers") {
		t.Errorf("doctor --read-buffers 32769: %v, want a usage error naming --read-buffers", err)
	}
}

// TestDoctorLoopsPastTheLockedMemoryCountIsAUsageError: a --loops whose
// locked memory a uint64 cannot count (about 10^14 loops) wrapped around
// in engine.LockedMemory, and doctor judged the limit against the small
// remainder, printing it as the need. No host has that many CPUs: it is
// a usage error (exit 2) naming --loops, with --send-zc too, whose loops
// are larger and wrap sooner.
func TestDoctorLoopsPastTheLockedMemoryCountIsAUsageError(t *testing.T) {
	for _, args := range [][]string{
		{"--loops", "100000000000000"},
		{"--loops", "9223372036854775807"},
		{"--loops", "10000000000000", "--send-zc"},
	} {
		err := doctor(context.Background(), args, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--loops") {
			t.Errorf("doctor %v: %v, want a usage error naming --loops", args, err)
		}
	}
}

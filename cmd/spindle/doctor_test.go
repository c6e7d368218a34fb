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
		{Name: uring.FeatShortSendLinkCut, Supported: true},
		{Name: uring.FeatShortSendSkipCleared, Supported: true},
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

// TestDoctorSaysQuietSendsLimited: where a SEND cut short does not fail its
// link, or with IOSQE_CQE_SKIP_SUCCESS posts no result (a kernel patched
// so, or a probe that could not tell), the engine sends quiet SENDs for
// one-segment replies only, or none; doctor says which and why, and nothing where the kernel
// fails both.
func TestDoctorSaysQuietSendsLimited(t *testing.T) {
	features := func(linkCut, skipCleared bool) *uring.Features {
		return &uring.Features{Available: true, List: []uring.Feature{
			{Name: uring.FeatMultishotRecv, Supported: true},
			{Name: uring.FeatMultishotAccept, Supported: true},
			{Name: uring.FeatNAPI, Supported: true},
			{Name: uring.FeatShortSendLinkCut, Supported: linkCut, MinKernel: "6.0", Reason: "the NOP after it completed"},
			{Name: uring.FeatShortSendSkipCleared, Supported: skipCleared, MinKernel: "6.0", Reason: "posted no completion"},
		}}
	}
	for _, tc := range []struct {
		name                 string
		linkCut, skipCleared bool
		want                 []string // "" for no warning
	}{
		{"both", true, true, nil},
		{"no link cut", false, true, []string{"one-segment replies only", uring.FeatShortSendLinkCut, "the NOP after it completed"}},
		{"no skip cleared", true, false, []string{"no quiet SENDs", uring.FeatShortSendSkipCleared, "posted no completion"}},
		{"neither", false, false, []string{"no quiet SENDs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ioUringWarnings(features(tc.linkCut, tc.skipCleared), nil)
			if tc.want == nil {
				if len(w) > 0 {
					t.Errorf("warnings %q, want none", w)
				}
				return
			}
			if len(w) != 1 {
				t.Fatalf("warnings %q, want one", w)
			}
			for _, s := range tc.want {
				if !strings.Contains(w[0], s) {
					t.Errorf("warning %q does not say %q", w[0], s)
				}
			}
		})
	}
}

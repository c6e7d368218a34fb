package uring

import (
	"time"

	"github.com/spindlenet/spindle/internal/sys"
)

// NAPIConfig configures NAPI busy polling for a ring (IORING_REGISTER_NAPI).
type NAPIConfig struct {
	// BusyPollTimeout is how long a wait busy-polls the NAPI instances of the
	// ring's sockets before sleeping (µs resolution, rounded up; 6.9).
	// Default 0 (or negative): no busy polling.
	BusyPollTimeout time.Duration
	// PreferBusyPoll asks the device to defer interrupts while busy polling
	// (SO_PREFER_BUSY_POLL semantics; 6.9). Default false.
	PreferBusyPoll bool
	// Static switches to static tracking (6.13): the ring polls only the NAPI
	// ids added with AddNAPIID, instead of learning them from its sockets.
	Static bool
}

// PageKind says which pages back off-heap memory (see MapAnon).
type PageKind = sys.PageKind

// Page kinds.
const (
	PageSmall = sys.PageSmall
	PageTHP   = sys.PageTHP
	PageHuge  = sys.PageHuge
)

// MapAnon returns off-heap memory (see internal/sys.MapAnon): length bytes,
// page-aligned, on huge pages when huge is set and they can be had (hugetlb
// pages faulted in before it returns, where the pool and the process's
// hugetlb cgroup limit allow, else transparent huge pages, else base pages;
// the PageKind says which). Free it with Unmap. Any goroutine.
func MapAnon(length int, huge bool) ([]byte, PageKind, error) { return sys.MapAnon(length, huge) }

// Unmap frees memory from MapAnon. Any goroutine.
func Unmap(b []byte) error { return sys.Unmap(b) }

// Mbind binds memory from MapAnon to NUMA node (MPOL_PREFERRED). Any goroutine.
func Mbind(b []byte, node int) error { return sys.Mbind(b, node) }

package engine

import (
	"math"
	"os"
	"testing"
)

// TestLockedMemory: what an engine charges to RLIMIT_MEMLOCK without
// CAP_IPC_LOCK, per loop and in all. Measured on Linux 6.18 (a child
// without CAP_IPC_LOCK under prlimit --memlock, one second apart so that
// the last one's rings were freed): one default uring loop ran from
// 208-228 KiB on, two from 416-432 KiB, and the send slab's registration
// (SendZCThreshold) failed below 2256 KiB for one loop and succeeded at
// 2280 KiB.
func TestLockedMemory(t *testing.T) {
	if os.Getpagesize() != 4096 {
		t.Skipf("the figures are for 4 KiB pages, not %d", os.Getpagesize())
	}
	const kib = 1 << 10
	for _, tc := range []struct {
		name  string
		cfg   *Config
		loops int
		want  uint64
	}{
		// Rings 136 KiB (8192 CQEs, 1024 indexes, a header page), SQEs
		// 64 KiB, the buffer ring 8 KiB (512 entries); 24 KiB for the
		// probe rings.
		{"default, one loop", nil, 1, 208*kib + 24*kib},
		{"default, two loops", nil, 2, 2*208*kib + 24*kib},
		{"uring-napi", &Config{Backend: BackendURingNAPI}, 1, 208*kib + 24*kib},
		{"a 32768-entry buffer ring", &Config{ReadBuffers: 1 << 15}, 1, (200+512)*kib + 24*kib},
		{"send slab registered", &Config{SendZCThreshold: 4096}, 1, (208+2048)*kib + 24*kib},
		{"send slab of 4 MiB buffers", &Config{SendZCThreshold: 4096, ReadBufferSize: 4 << 20}, 1, (208+4096)*kib + 24*kib},
		{"epoll", &Config{Backend: BackendEpoll}, 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LockedMemory(tc.cfg, tc.loops)
			if err != nil || got != tc.want {
				t.Errorf("LockedMemory = %d KiB, %v; want %d KiB", got/kib, err, tc.want/kib)
			}
		})
	}
	if _, err := LockedMemory(&Config{ReadBuffers: -1}, 1); err == nil {
		t.Error("LockedMemory of ReadBuffers -1: no error")
	}
}

// TestLockedMemoryPastUint64Refused: loops whose bytes a uint64 cannot
// hold (232 KiB a default loop wraps past 2^64 at 86,607,685,141,741
// loops) came back as the remainder of the wrapped product, with no
// error, and doctor printed it as the need; they are an error. The most
// that fit still count exactly.
func TestLockedMemoryPastUint64Refused(t *testing.T) {
	if os.Getpagesize() != 4096 {
		t.Skipf("the figures are for 4 KiB pages, not %d", os.Getpagesize())
	}
	const most = 86607685141740 // (2^64 - 1 - 24 KiB) / 208 KiB
	if got, err := LockedMemory(nil, most); err != nil || got != most*208<<10+24<<10 {
		t.Errorf("LockedMemory(nil, %d) = %d, %v; want %d", most, got, err, uint64(most*208<<10+24<<10))
	}
	for _, loops := range []int{most + 1, 1e14, math.MaxInt} {
		if got, err := LockedMemory(nil, loops); err == nil {
			t.Errorf("LockedMemory(nil, %d) = %d, no error", loops, got)
		}
	}
}

package engine

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/uring"
)

// TestDegradedSaidPerEngine runs two uring-napi engines, one after the other,
// each asking for busy polling and SEND_ZC from a kernel that refuses both
// (the NAPI registration as without CONFIG_NET_RX_BUSY_POLL, SEND_ZC's
// usage report as 6.0 and 6.1 do): each engine must say once, through its
// own Logf, that it runs without each, and send without SEND_ZC. One
// process-wide Once used to say only the first refusal of the first engine.
func TestDegradedSaidPerEngine(t *testing.T) {
	register, usable := registerNAPI, sendZCUsable
	registerNAPI = func(*uring.Ring, uring.NAPIConfig) (uring.NAPIConfig, error) {
		return uring.NAPIConfig{}, os.NewSyscallError("io_uring_register", unix.EINVAL)
	}
	sendZCUsable = func() bool { return false }
	t.Cleanup(func() { registerNAPI, sendZCUsable = register, usable })
	for i := range 2 {
		var logs logLines
		cfg := testConfig(BackendURingNAPI)
		cfg.Logf = logs.logf
		cfg.SendZCThreshold = 4096
		e, addr := startEngine(t, cfg, &echoHandler{})
		if err := echoOnce(addr, uint64(i), 1<<20, 64<<10, nil); err != nil {
			t.Fatal(err)
		}
		if s := e.Stats(); s.ZCSends != 0 {
			t.Errorf("engine %d: %d SEND_ZC requests where the kernel refuses them", i, s.ZCSends)
		}
		for _, want := range []string{"without busy polling", "without SEND_ZC"} {
			if n := logs.count(want); n != 1 {
				t.Errorf("engine %d said %q %d times, want once; logs: %q", i, want, n, logs.all())
			}
		}
	}
}

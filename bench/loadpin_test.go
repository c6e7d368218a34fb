package bench

import (
	"strings"
	"testing"
)

// TestLoadConfigPinProcessNeedsCPUs: PinProcess without CPUs is refused
// before anything starts, saying so, rather than failing in the pin with
// sched_setaffinity's EINVAL for an empty mask.
func TestLoadConfigPinProcessNeedsCPUs(t *testing.T) {
	_, err := LoadConfig{Addr: "127.0.0.1:1", PinProcess: true}.withDefaults()
	if err == nil || !strings.Contains(err.Error(), "PinProcess without CPUs") {
		t.Errorf("PinProcess without CPUs: %v", err)
	}
	if _, err := (LoadConfig{Addr: "127.0.0.1:1", PinProcess: true, CPUs: []int{0}}).withDefaults(); err != nil {
		t.Errorf("PinProcess with CPU 0: %v", err)
	}
}

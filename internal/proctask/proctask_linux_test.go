package proctask

import (
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// TestCPUsAllowed reads a thread pinned to one CPU: that CPU.
func TestCPUsAllowed(t *testing.T) {
	cpus, err := sys.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	want := cpus[len(cpus)-1]
	done := make(chan struct{})
	go sys.LockedThread(func() {
		defer close(done)
		var set unix.CPUSet
		set.Set(want)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			t.Error(err)
			return
		}
		got, err := CPUsAllowed(unix.Gettid())
		if err != nil || got != strconv.Itoa(want) {
			t.Errorf("CPUsAllowed = %q, %v; want %d", got, err, want)
		}
	})
	<-done
	if _, err := CPUsAllowed(-1); err == nil {
		t.Error("CPUsAllowed(-1): no error")
	}
}

// TestIOWorkersNone: a thread id no thread has has no workers.
func TestIOWorkersNone(t *testing.T) {
	if w := IOWorkers(-1); len(w) != 0 {
		t.Errorf("IOWorkers(-1) = %v", w)
	}
}

//go:build linux

package topo

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/cgrouptest"
)

// TestCpusetPartitionLive makes an isolated cgroup v2 cpuset partition of
// the last online CPU and reads it back as isolated, then restores the
// hierarchy. It needs root and the cpuset controller on cgroup v2; a host
// whose controller is bound to cgroup v1 skips saying so.
func TestCpusetPartitionLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup v2 cpuset partition needs root")
	}
	cgrouptest.Hold(t) // before reading: another package's test may hold CPU 1
	h, err := Read("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Cpuset.Mount == "" || strings.Contains(h.Cpuset.Source, "cpuset controller") {
		t.Skipf("no cgroup v2 cpuset partition can be made here: %s", h.Cpuset.Source)
	}
	if h.Online.Len() < 2 {
		t.Skipf("an isolated partition must leave its parent a CPU: %d online", h.Online.Len())
	}
	cpu := h.Online[h.Online.Len()-1]
	if h.IsolatedDomain.Contains(cpu) || h.IsolatedPartition.Contains(cpu) {
		t.Skipf("CPU %d is isolated already (isolcpus or a partition): not taken", cpu)
	}
	mount := h.Cpuset.Mount
	cgrouptest.EnableCpuset(t, mount)
	dir := filepath.Join(mount, fmt.Sprintf("spindle-topo-test-%d", os.Getpid()))
	cgrouptest.Mkdir(t, mount, dir)
	if err := cgrouptest.Write(filepath.Join(dir, "cpuset.cpus"), fmt.Sprint(cpu)); err != nil {
		t.Fatal(err)
	}
	// Isolated partitions are in every kernel with cgroup v2
	// cpuset.cpus.partition since 6.1.
	cgrouptest.SetPartition(t, dir, "isolated")
	part := filepath.Join(dir, "cpuset.cpus.partition")
	if s, _ := os.ReadFile(part); strings.TrimSpace(string(s)) != "isolated" {
		t.Fatalf("%s reads %q after writing isolated", part, s)
	}
	h, err = Read("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.IsolatedPartition.Contains(cpu) {
		t.Errorf("IsolatedPartition %s (from %s) lacks CPU %d of the partition just made", h.IsolatedPartition, h.Cpuset.Source, cpu)
	}
	cg := "/" + filepath.Base(dir)
	if !slices.Equal(h.PartitionOf(NewCPUSet(cpu)), []string{cg}) {
		t.Errorf("PartitionOf(%d) = %q, want [%s]; partitions %+v", cpu, h.PartitionOf(NewCPUSet(cpu)), cg, h.Cpuset.Partitions)
	}
}

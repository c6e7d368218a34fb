package topo

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// hotplugged returns the vm fixture's /proc/interrupts as read while CPU 1
// went offline: the header has CPU0 and CPU1, the lines from IRQ 36 on
// only CPU 0's count.
func hotplugged(t *testing.T) (good, bad []byte) {
	t.Helper()
	good, err := os.ReadFile("testdata/vm/proc/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	after := false
	for line := range strings.Lines(string(good)) {
		if strings.HasPrefix(line, " 36:") {
			after = true
		}
		label, rest, _ := strings.Cut(line, ":")
		if _, err := strconv.Atoi(strings.TrimSpace(label)); after && err == nil {
			f := strings.Fields(rest)
			line = label + ": " + strings.Join(append(f[:1:1], f[2:]...), "  ") + "\n"
		}
		b.WriteString(line)
	}
	return good, []byte(b.String())
}

// TestReadCPUHotplugDuringInterrupts: a CPU that goes on- or offline while
// /proc/interrupts is read leaves lines with one count more or less than
// its header has CPUs. Read failed outright ("irq 36 has 1 counts for 2
// cpus"). It now reads the file again; here the first reading is torn and
// the second whole, and Read names eth0's queue IRQ from the second.
func TestReadCPUHotplugDuringInterrupts(t *testing.T) {
	good, bad := hotplugged(t)
	root := copyFixture(t, "testdata/vm")
	path := filepath.Join(root, "proc/interrupts")
	readings := 0
	readFile = func(p string) ([]byte, error) {
		if p != path {
			return os.ReadFile(p)
		}
		readings++
		if readings == 1 {
			return bad, nil
		}
		return good, nil
	}
	t.Cleanup(func() { readFile = os.ReadFile })
	h, err := Read(root, nil)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if readings != 2 {
		t.Errorf("/proc/interrupts read %d times, want 2", readings)
	}
	if n := h.NIC("eth0"); n == nil || n.RxQueues[0].IRQ != 38 {
		t.Errorf("eth0 rx-0 IRQ not found from the second reading: %+v", n)
	}
	if len(h.Notes) != 0 {
		t.Errorf("notes %q", h.Notes)
	}
}

// TestReadTornInterrupts: a /proc/interrupts that stays torn (3 readings)
// is a note, not a failed Read; the queue IRQs then come from netlink
// only.
func TestReadTornInterrupts(t *testing.T) {
	_, bad := hotplugged(t)
	if _, err := ParseInterrupts(bad); !errors.Is(err, ErrCPUsChanged) {
		t.Fatalf("ParseInterrupts of a torn reading: %v, want ErrCPUsChanged", err)
	}
	root := copyFixture(t, "testdata/vm")
	if err := os.WriteFile(filepath.Join(root, "proc/interrupts"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := Read(root, nil)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if note := strings.Join(h.Notes, "; "); !strings.Contains(note, "irq 36") || !strings.Contains(note, "only netlink") {
		t.Errorf("notes %q, want irq 36's torn line and its consequence", note)
	}
	// A CPU onlined during the read: a line with a count more than the
	// header has CPUs is torn too (its count went into the description).
	more := "           CPU0       CPU1\n 38:          0       1244          7 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n"
	if in, err := ParseInterrupts([]byte(more)); !errors.Is(err, ErrCPUsChanged) {
		t.Errorf("ParseInterrupts with a count too many: %v (irq 38: %+v), want ErrCPUsChanged", err, in.IRQs[38])
	}
}

// TestReadNodeOfflineDuringRead: a NUMA node taken offline between the
// reading of node/online and of its directory (a CPU-less memory node,
// such as a CXL expander's, offlined at run time; its directory goes with
// it) is left out, as a CPU gone offline is. Read failed outright ("topo:
// node 1: open .../node1/cpulist: no such file or directory"), and every
// tune command with it.
func TestReadNodeOfflineDuringRead(t *testing.T) {
	root := copyFixture(t, "testdata/2socket-16q")
	if err := os.RemoveAll(filepath.Join(root, "sys/devices/system/node/node1")); err != nil {
		t.Fatal(err)
	}
	h, err := Read(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Nodes) != 1 || h.Nodes[0].ID != 0 {
		t.Errorf("nodes %+v, want node 0 alone", h.Nodes)
	}
	// The fixture's node 1 had CPUs 12-23: no node lists them now.
	for _, c := range h.CPUs {
		if want := map[bool]int{true: 0, false: -1}[h.Nodes[0].CPUs.Contains(c.ID)]; c.Node != want {
			t.Errorf("CPU %d on node %d, want %d", c.ID, c.Node, want)
		}
	}
}

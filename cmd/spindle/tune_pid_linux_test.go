package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/topo"
	"github.com/spindlenet/spindle/tune"
)

// TestTuneDiagnoseServicePID checks the memlock diagnosis against a
// service's own limit. Before --pid it read only the tuner's (root, with
// CAP_IPC_LOCK), so it could not fire for a service run as another user
// with a low RLIMIT_MEMLOCK; now --pid reads the service's, and without
// --pid the report says the service's limit was not checked.
func TestTuneDiagnoseServicePID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the stand-in service is started as nobody with its limit lowered")
	}
	// A service as nobody (no capabilities after the exec) whose
	// locked-memory limit is 128 KiB, below what one engine loop takes
	// (engine.LockedMemory), the default need diagnose judges it by.
	cmd := exec.Command("/bin/sh", "-c", "ulimit -l 128 && exec sleep 60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if strings.TrimSpace(string(b)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never became sleep (comm %q)", pid, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	p := strconv.Itoa(pid)

	out, err := tuneRun(t, "inspect", "--json", "--pid", p)
	if err != nil {
		t.Fatal(err)
	}
	var h topo.Host
	strictJSON(t, out, &h)
	if want := (topo.Memlock{Soft: 128 << 10, Hard: 128 << 10, PID: pid, Comm: "sleep"}); h.Memlock != want {
		t.Errorf("inspect --pid %d: memlock %+v, want %+v", pid, h.Memlock, want)
	}

	out, err = tuneRun(t, "diagnose", "--json", "--period", "1ms", "--pid", p)
	if err != nil {
		t.Fatal(err)
	}
	var d diagnoseReport
	strictJSON(t, out, &d)
	if f := findingByID(d, "memlock-low"); f == nil || !strings.Contains(f.Evidence[0], "pid "+p+" (sleep): soft 128 KiB") {
		t.Errorf("diagnose --pid %d: memlock-low %+v\n%s", pid, f, out)
	}
	if f := findingByID(d, "memlock-unchecked"); f != nil {
		t.Errorf("diagnose --pid %d says the service was not checked: %+v", pid, f)
	}

	// Without --pid the limit read is the tuner's own: root's, which
	// has CAP_IPC_LOCK, so no warning, and a note instead.
	out, err = tuneRun(t, "diagnose", "--json", "--period", "1ms")
	if err != nil {
		t.Fatal(err)
	}
	d = diagnoseReport{}
	strictJSON(t, out, &d)
	if f := findingByID(d, "memlock-unchecked"); f == nil || !strings.Contains(f.Fix, "--pid") {
		t.Errorf("diagnose without --pid: memlock-unchecked %+v\n%s", f, out)
	}
	if f := findingByID(d, "memlock-low"); f != nil {
		t.Errorf("diagnose without --pid, as root: %+v", f)
	}

	if _, err := tuneRun(t, "inspect", "--pid", "-3"); err == nil {
		t.Error("inspect --pid -3 succeeded")
	}
	// A process that is gone is an error naming it, not root's limit.
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := tuneRun(t, "diagnose", "--period", "1ms", "--pid", p); err == nil || !strings.Contains(err.Error(), "--pid "+p) {
		t.Errorf("diagnose --pid of an exited process: %v", err)
	}
}

func findingByID(d diagnoseReport, id string) *tune.Finding {
	for i := range d.Findings {
		if d.Findings[i].ID == id {
			return &d.Findings[i]
		}
	}
	return nil
}

// TestTuneServiceCgroupOutsidePartition: `tune inspect --pid` and `tune
// diagnose --pid` read the service's cgroup from /proc/PID/cgroup under
// --root, and diagnose reports a service outside the cpuset partition
// that holds its loop CPUs, which the kernel will not let it run on. A
// captured tree (smt-isol) whose CPUs 2-7 are isolated partition /rt,
// with a service in /system.slice.
func TestTuneServiceCgroupOutsidePartition(t *testing.T) {
	root := hostCopy(t, "../../topo/testdata/smt-isol")
	limits, err := os.ReadFile(filepath.Join(root, "proc/self/limits"))
	if err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{
		"proc/self/mountinfo":                    "35 24 0:30 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
		"sys/fs/cgroup/cgroup.controllers":       "cpuset cpu\n",
		"sys/fs/cgroup/rt/cpuset.cpus.partition": "isolated\n",
		"sys/fs/cgroup/rt/cpuset.cpus.effective": "2-7\n",
		"proc/4242/limits":                       string(limits),
		"proc/4242/status":                       "CapEff:\t0000000000000000\n",
		"proc/4242/comm":                         "svc\n",
		"proc/4242/cgroup":                       "0::/system.slice/svc.service\n",
	} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := tuneRun(t, "inspect", "--root", root, "--pid", "4242")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "cgroup (pid 4242 (svc)): /system.slice/svc.service") {
		t.Errorf("inspect --pid does not show the service's cgroup:\n%s", out)
	}
	out, err = tuneRun(t, "diagnose", "--root", root, "--pid", "4242", "--loop-cpus", "2-3", "--period", "1ms", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var d diagnoseReport
	strictJSON(t, out, &d)
	f := findingByID(d, "service-outside-partition")
	if f == nil || !strings.Contains(strings.Join(f.Evidence, "\n"), "loop CPUs 2-3 are those of isolated partition /rt") || !strings.Contains(f.Fix, "/sys/fs/cgroup/rt/cgroup.procs") {
		t.Errorf("diagnose --pid of a service outside /rt, loop CPUs 2-3: %+v\n%s", f, out)
	}
	out, err = tuneRun(t, "diagnose", "--root", root, "--pid", "4242", "--loop-cpus", "0-1", "--period", "1ms", "--json")
	if err != nil {
		t.Fatal(err)
	}
	d = diagnoseReport{}
	strictJSON(t, out, &d)
	if f := findingByID(d, "service-outside-partition"); f != nil {
		t.Errorf("diagnose --pid, loop CPUs 0-1 outside /rt: %+v", f)
	}
	if err := os.Remove(filepath.Join(root, "proc/4242/cgroup")); err != nil {
		t.Fatal(err)
	}
	if _, err := tuneRun(t, "diagnose", "--root", root, "--pid", "4242", "--period", "1ms"); err == nil || !strings.Contains(err.Error(), "--pid 4242") || !strings.Contains(err.Error(), "cgroup") {
		t.Errorf("diagnose --pid without /proc/PID/cgroup: %v", err)
	}
}

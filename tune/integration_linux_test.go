//go:build linux

package tune

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/veth"
	"github.com/spindlenet/spindle/topo"
)

func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestNetnsApplyRevert applies a real plan inside a network namespace the
// test creates (a veth pair, RPS/RFS, XPS, device NAPI settings in sysfs,
// per-NAPI irq-suspend-timeout over netdev netlink, a per-namespace
// sysctl), verifies it, reverts it and verifies every value byte for byte;
// then makes the kernel reject a write mid-plan and verifies the rollback.
// The host's own settings are read before and after and must not change.
func TestNetnsApplyRevert(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace and write sysfs")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) not installed")
	}
	pid := os.Getpid()
	ns := fmt.Sprintf("spd-tune-%d", pid)
	va, vb := fmt.Sprintf("stn%da", pid), fmt.Sprintf("stn%db", pid)
	run(t, "ip", "netns", "add", ns)
	// Cleanups run last-in first-out: the namespace is deleted, then the
	// test checks that it is gone.
	t.Cleanup(func() {
		if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), ns) {
			t.Errorf("namespace %s left behind: %s", ns, out)
		}
	})
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "-n", ns, "link", "add", va, "type", "veth", "peer", "name", vb)
	run(t, "ip", "-n", ns, "link", "set", va, "up")
	run(t, "ip", "-n", ns, "link", "set", vb, "up")
	// With GRO on and TSO off a veth has NAPI instances (KERNEL.md).
	napi := false
	if _, err := exec.LookPath("ethtool"); err == nil {
		for _, v := range []string{va, vb} {
			run(t, "ip", "netns", "exec", ns, "ethtool", "-K", v, "gro", "on", "tso", "off")
		}
		napi = true
	} else {
		t.Log("ethtool not installed: NAPI ids on the veth are not checked")
	}
	nsPath := veth.Path(ns)

	// Everything of the host's that a plan could write: its sysctls, every
	// IRQ's affinity (the VM's control-channel IRQs 41-43 included), and
	// every interface's queue and NAPI files.
	hostBefore := hostSettings(t)

	view := t.TempDir()
	stateDir := t.TempDir()
	var logs []string
	logf := func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }
	err := inNetNSView(nsPath, view, func() (err error) {
		h, err := topo.ReadRootWithNetlink(view)
		if err != nil {
			return err
		}
		if h.NIC(va) == nil || h.NIC(vb) == nil {
			return fmt.Errorf("namespace view lacks the veth pair: %v", nicNames(h))
		}
		if h.NIC("eth0") != nil {
			return errors.New("namespace view shows the host's eth0")
		}
		if h.Netlink.Netdev != "ok" || h.Netlink.Ethtool != "ok" {
			return fmt.Errorf("netlink in the namespace: %+v", h.Netlink)
		}
		if napi {
			// veth registers NAPI instances with GRO on (napi-get lists
			// them) but does not link them to its queues (queue-get has
			// no napi-id), so only the instances are checked.
			if ns := h.NIC(va).NAPIs; len(ns) == 0 || ns[0].ID < 257 {
				return fmt.Errorf("%s has no NAPI instance with GRO on: %+v (%s)", va, ns, h.NIC(va).NAPIErr)
			}
		}
		nc, err := topo.DialNetlink()
		if err != nil {
			return err
		}
		defer nc.Close()
		somax, err := os.ReadFile(filepath.Join(view, "/proc/sys/net/core/somaxconn"))
		if err != nil {
			return err
		}
		var curSomax int
		fmt.Sscan(string(somax), &curSomax)
		cfg := PlanConfig{Interfaces: []string{va, vb}, LoopCPUs: h.Online, BusyPollUsecs: 50, Somaxconn: curSomax + 1, IRQSuspendTimeoutNs: 20_000_000}
		if h.Online.Len() < 2 {
			return errors.New("the test needs 2 CPUs so that RPS has a set to spread over")
		}
		p, err := MakePlan(h, cfg)
		if err != nil {
			return err
		}
		want := []string{
			"/sys/class/net/" + va + "/queues/rx-0/rps_cpus",
			"/sys/class/net/" + va + "/queues/rx-0/rps_flow_cnt",
			"/sys/class/net/" + vb + "/queues/tx-0/xps_cpus",
			"/sys/class/net/" + va + "/napi_defer_hard_irqs",
			"/sys/class/net/" + vb + "/gro_flush_timeout",
			"/proc/sys/net/core/somaxconn",
		}
		// The SYN backlog is per namespace too; raised when below.
		if n, err := strconv.Atoi(h.Sysctls["net.ipv4.tcp_max_syn_backlog"]); err != nil {
			return fmt.Errorf("tcp_max_syn_backlog in the namespace: %v", err)
		} else if n < cfg.Somaxconn {
			want = append(want, "/proc/sys/net/ipv4/tcp_max_syn_backlog")
		}
		for _, w := range want {
			if writeTo(p, w) == nil {
				return fmt.Errorf("plan lacks %s; writes: %v", w, targets(p))
			}
		}
		if napi {
			n := 0
			for _, w := range p.Writes {
				if w.Kind == KindNAPI {
					n++
				}
			}
			if n < 2 {
				return fmt.Errorf("plan has %d netdev napi-set writes for the two veth NAPIs: %v", n, targets(p))
			}
		}
		// veth has no coalescing and the busy-poll sysctls live only in
		// the initial namespace: both must be notes, not failures.
		if !hasNote(p, va+" coalescing not changed") || !hasNote(p, "net.core.busy_poll does not exist") {
			return fmt.Errorf("notes: %q", p.Notes)
		}
		before := map[string]string{}
		tgt := Target{Root: view, Netlink: nc}
		for _, w := range p.Writes {
			if before[w.Target()], err = tgt.read(w); err != nil {
				return err
			}
		}
		state := filepath.Join(stateDir, "state.json")
		if _, err := Apply(p, tgt, state); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		for _, w := range p.Writes {
			got, err := tgt.read(w)
			if err != nil {
				return err
			}
			if !equalValues(w.Format, got, w.New) {
				return fmt.Errorf("after apply %s = %q, want %q", w.Target(), got, w.New)
			}
		}
		logf("applied %d writes in %s", len(p.Writes), ns)
		drifted, _, err := Revert(state, tgt)
		if err != nil {
			return fmt.Errorf("revert: %w", err)
		}
		if len(drifted) > 0 {
			return fmt.Errorf("drifted: %v", drifted)
		}
		if err := sameBytes(tgt, p.Writes, before); err != nil {
			return fmt.Errorf("after revert: %w", err)
		}

		// A write the kernel rejects, at the end of a fresh plan.
		p2, err := MakePlan(h, cfg)
		if err != nil {
			return err
		}
		bad := Write{Kind: KindFile, Path: "/sys/class/net/" + vb + "/queues/rx-0/rps_flow_cnt", Format: FormatInt,
			Old: before["/sys/class/net/"+vb+"/queues/rx-0/rps_flow_cnt"], New: "-1", Reason: "test: the kernel rejects this (kstrtoul)"}
		if bad.Old == "" {
			return errors.New("no rps_flow_cnt value recorded for " + vb)
		}
		// In place of the plan's own write of that file, moved to the
		// end: a plan writes each target once.
		p2.Writes = append(slices.DeleteFunc(p2.Writes, func(w Write) bool { return w.Path == bad.Path }), bad)
		state2 := filepath.Join(stateDir, "state2.json")
		_, err = Apply(p2, tgt, state2)
		if err == nil || !strings.Contains(err.Error(), "rolled back") {
			return fmt.Errorf("apply of a plan with a rejected write: %v", err)
		}
		logf("rejected write: %v", err)
		if err := sameBytes(tgt, p.Writes, before); err != nil {
			return fmt.Errorf("after rollback: %w", err)
		}
		if _, err := os.Stat(state2); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("state file left after rollback: %v", err)
		}

		// A write the kernel accepts but stores differently: rps_flow_cnt
		// is rounded up to a power of two, so 1000 reads back as 1024.
		// Apply must notice on reading it back, and roll back.
		p4, err := MakePlan(h, cfg)
		if err != nil {
			return err
		}
		rounded := bad
		rounded.New, rounded.Reason = "1000", "test: the kernel stores 1024"
		p4.Writes = append(slices.DeleteFunc(p4.Writes, func(w Write) bool { return w.Path == rounded.Path }), rounded)
		state4 := filepath.Join(stateDir, "state4.json")
		_, err = Apply(p4, tgt, state4)
		if err == nil || !strings.Contains(err.Error(), `reads back "1024"`) || !strings.Contains(err.Error(), "rolled back") {
			return fmt.Errorf("apply of a write the kernel rounds: %v", err)
		}
		if err := sameBytes(tgt, p.Writes, before); err != nil {
			return fmt.Errorf("after the rounded write's rollback: %w", err)
		}
		if _, err := os.Stat(state4); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("state file left after rollback: %v", err)
		}

		// veth implements no coalescing: the kernel refuses coalesce-set
		// over netlink, and Apply refuses a coalesce write when it reads
		// the current value, before anything is written.
		if err := nc.SetCoalesce(h.NIC(va).Ifindex, map[string]uint32{"rx-usecs": 8}); !errors.Is(err, topo.ErrNotSupported) {
			return fmt.Errorf("coalesce-set on veth: %v, want ErrNotSupported", err)
		}
		p3 := &Plan{Writes: append(slices.Clone(p.Writes), Write{Kind: KindCoalesce, Iface: va, Ifindex: h.NIC(va).Ifindex,
			Param: "rx-usecs", Format: FormatInt, Old: "0", New: "8", Reason: "test: veth has no coalescing"})}
		state3 := filepath.Join(stateDir, "state3.json")
		if _, err := Apply(p3, tgt, state3); !errors.Is(err, topo.ErrNotSupported) {
			return fmt.Errorf("apply of a coalesce write on veth: %v, want ErrNotSupported", err)
		}
		if _, err := os.Stat(state3); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("state file written for a plan refused before writing: %v", err)
		}
		if err := sameBytes(tgt, p.Writes, before); err != nil {
			return fmt.Errorf("after a refused coalesce plan: %w", err)
		}
		return nil
	})
	for _, l := range logs {
		t.Log(l)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Other packages' tests may add or remove their own interfaces in the
	// meantime: compare what exists at both readings.
	hostAfter := hostSettings(t)
	for f, v := range hostBefore {
		if w, ok := hostAfter[f]; ok && w != v {
			t.Errorf("host setting %s changed: %q -> %q", f, v, w)
		}
	}
}

// hostSettings reads, in the calling thread's (the host's) namespace, every
// file a tuning plan could write, and the host NICs' coalescing and NAPI
// settings over netlink.
func hostSettings(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, pat := range []string{
		"/proc/sys/net/core/somaxconn", "/proc/sys/net/core/rps_sock_flow_entries",
		"/proc/sys/net/core/busy_poll", "/proc/sys/net/core/busy_read", "/proc/sys/net/ipv4/tcp_max_syn_backlog",
		"/proc/irq/*/smp_affinity_list",
		"/sys/class/net/*/gro_flush_timeout", "/sys/class/net/*/napi_defer_hard_irqs",
		"/sys/class/net/*/queues/rx-*/rps_cpus", "/sys/class/net/*/queues/rx-*/rps_flow_cnt",
		"/sys/class/net/*/queues/tx-*/xps_cpus",
	} {
		files, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				m[f] = string(b)
			}
		}
	}
	if len(m) < 10 {
		t.Fatalf("read only %d host settings: %v", len(m), m)
	}
	h, err := topo.ReadLive()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range h.NICs {
		m["coalesce "+n.Name] = fmt.Sprint(n.Coalesce)
		for _, napi := range n.NAPIs {
			m[fmt.Sprintf("napi %s %d", n.Name, napi.ID)] = fmt.Sprintf("%+v", napi)
		}
	}
	return m
}

func sameBytes(tgt Target, writes []Write, before map[string]string) error {
	for _, w := range writes {
		got, err := tgt.read(w)
		if err != nil {
			return err
		}
		if got != before[w.Target()] {
			return fmt.Errorf("%s = %q, was %q", w.Target(), got, before[w.Target()])
		}
	}
	return nil
}

func nicNames(h *topo.Host) []string {
	var out []string
	for _, n := range h.NICs {
		out = append(out, n.Name)
	}
	return out
}

// TestNetnsRevertTargetsGone applies a plan to a veth pair inside a
// namespace the test creates, then, before reverting, either re-creates
// the veth NAPI instances with new ids (GRO off and on) or deletes the
// veth pair. Revert used to fail on its first read and restore nothing,
// not even the namespace's somaxconn, and kept the state file. Now it
// restores somaxconn and everything else that exists, names the gone
// targets and moves the state file aside. The host's settings must not
// change.
func TestNetnsRevertTargetsGone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace and write sysfs")
	}
	for _, tool := range []string{"ip", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	hostBefore := hostSettings(t)
	pid := os.Getpid()
	ns := fmt.Sprintf("spd-gone-%d", pid)
	va, vb := fmt.Sprintf("sgn%da", pid), fmt.Sprintf("sgn%db", pid)
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", ns).Run()
		if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), ns) {
			t.Errorf("namespace %s left behind: %s", ns, out)
		}
		hostAfter := hostSettings(t)
		for f, v := range hostBefore {
			if w, ok := hostAfter[f]; ok && w != v {
				t.Errorf("host setting %s changed: %q -> %q", f, v, w)
			}
		}
	})
	nsPath := veth.Path(ns)
	view := t.TempDir()
	inNS := func(fn func(tgt Target, h *topo.Host) error) {
		t.Helper()
		if err := inNetNSHost(nsPath, view, fn); err != nil {
			t.Fatal(err)
		}
	}
	somax := func() (s string) {
		inNS(func(Target, *topo.Host) error {
			b, err := os.ReadFile(filepath.Join(view, "/proc/sys/net/core/somaxconn"))
			s = strings.TrimSpace(string(b))
			return err
		})
		return s
	}
	for _, sc := range []struct {
		name   string
		change func()
	}{
		{"NAPI ids re-allocated", func() {
			for _, v := range []string{va, vb} {
				run(t, "ip", "netns", "exec", ns, "ethtool", "-K", v, "gro", "off")
				run(t, "ip", "netns", "exec", ns, "ethtool", "-K", v, "gro", "on")
			}
		}},
		{"veth deleted", func() { run(t, "ip", "-n", ns, "link", "del", va) }},
	} {
		t.Run(sc.name, func(t *testing.T) {
			run(t, "ip", "-n", ns, "link", "add", va, "type", "veth", "peer", "name", vb)
			defer exec.Command("ip", "-n", ns, "link", "del", va).Run()
			for _, v := range []string{va, vb} {
				run(t, "ip", "-n", ns, "link", "set", v, "up")
				run(t, "ip", "netns", "exec", ns, "ethtool", "-K", v, "gro", "on", "tso", "off")
			}
			orig := somax()
			state := filepath.Join(t.TempDir(), "state.json")
			var napiWrites int
			inNS(func(tgt Target, h *topo.Host) error {
				cur, err := strconv.Atoi(orig)
				if err != nil {
					return err
				}
				p, err := MakePlan(h, PlanConfig{Interfaces: []string{va, vb}, LoopCPUs: h.Online, BusyPollUsecs: 50, Somaxconn: cur + 1, IRQSuspendTimeoutNs: 20_000_000})
				if err != nil {
					return err
				}
				for _, w := range p.Writes {
					if w.Kind == KindNAPI {
						napiWrites++
					}
				}
				_, err = Apply(p, tgt, state)
				return err
			})
			if applied := somax(); applied == orig {
				t.Fatalf("somaxconn %s not changed by apply", applied)
			}
			sc.change()
			var notes []string
			var rerr error
			inNS(func(tgt Target, _ *topo.Host) error {
				notes, _, rerr = Revert(state, tgt)
				return nil
			})
			if rerr != nil {
				t.Fatalf("Revert: %v", rerr)
			}
			if after := somax(); after != orig {
				t.Errorf("somaxconn %s after revert, want %s", after, orig)
			}
			var gone int
			for _, n := range notes {
				if strings.Contains(n, ": gone (") {
					gone++
				}
			}
			t.Logf("%d gone, %d NAPI writes; notes: %q", gone, napiWrites, notes)
			if gone == 0 || napiWrites > 0 && gone < napiWrites {
				t.Errorf("%d targets reported gone, want at least %d (the NAPI writes) and one", gone, napiWrites)
			}
			if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state file kept (%v): every later apply would refuse", err)
			}
		})
	}
}

// inNetNSHost runs fn in the network namespace at nsPath with view mounted
// as its /proc and /sys, a netlink connection there, and the host read
// through both.
func inNetNSHost(nsPath, view string, fn func(tgt Target, h *topo.Host) error) error {
	return inNetNSView(nsPath, view, func() error {
		nc, err := topo.DialNetlink()
		if err != nil {
			return err
		}
		defer nc.Close()
		h, err := topo.ReadRootWithNetlink(view)
		if err != nil {
			return err
		}
		return fn(Target{Root: view, Netlink: nc}, h)
	})
}

// inNetNSView runs fn in the network namespace at nsPath with view mounted
// as its /proc and /sys (MountNetNSView), unmounting it after.
func inNetNSView(nsPath, view string, fn func() error) error {
	return InNetNS(nsPath, func() (err error) {
		cleanup, err := MountNetNSView(view)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := cleanup(); err == nil {
				err = cerr
			}
		}()
		return fn()
	})
}

// TestNetnsRevertKeepsPerNAPISettings: writing a device's
// napi_defer_hard_irqs or gro_flush_timeout in sysfs sets that value on
// every NAPI instance of the device too (netdev_set_defer_hard_irqs,
// Linux 6.13+). A busy-poll plan wrote the device files only, so its
// revert, writing the device's old value back, also wrote it over every
// instance, and a per-NAPI value set before (napi-set) was lost: the host
// did not end as it was.
func TestNetnsRevertKeepsPerNAPISettings(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace and write sysfs")
	}
	for _, tool := range []string{"ip", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	pid := os.Getpid()
	ns := fmt.Sprintf("spd-tunenapi-%d", pid)
	va, vb := fmt.Sprintf("stp%da", pid), fmt.Sprintf("stp%db", pid)
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "-n", ns, "link", "add", va, "type", "veth", "peer", "name", vb)
	run(t, "ip", "-n", ns, "link", "set", va, "up")
	run(t, "ip", "-n", ns, "link", "set", vb, "up")
	run(t, "ip", "netns", "exec", ns, "ethtool", "-K", va, "gro", "on", "tso", "off")
	errSkip := errors.New("skip")
	var skipWhy string
	view := t.TempDir()
	err := inNetNSHost(veth.Path(ns), view, func(tgt Target, h *topo.Host) error {
		nc := tgt.Netlink
		n := h.NIC(va)
		if n == nil || len(n.NAPIs) == 0 {
			skipWhy = fmt.Sprintf("%s has no NAPI instance with GRO on", va)
			return errSkip
		}
		id := n.NAPIs[0].ID
		want := map[string]uint64{"defer-hard-irqs": 7, "gro-flush-timeout": 12345}
		for param, v := range want {
			if err := nc.SetNAPI(id, param, v); err != nil {
				skipWhy = fmt.Sprintf("netdev napi-set %s (Linux 6.13+): %v", param, err)
				return errSkip
			}
		}
		h, err := topo.ReadRootWithNetlink(view)
		if err != nil {
			return err
		}
		devFiles := []string{"/sys/class/net/" + va + "/napi_defer_hard_irqs", "/sys/class/net/" + va + "/gro_flush_timeout"}
		devBefore := map[string]string{}
		for _, f := range devFiles {
			b, err := os.ReadFile(filepath.Join(view, f))
			if err != nil {
				return err
			}
			devBefore[f] = string(b)
		}
		p, err := MakePlan(h, PlanConfig{Interfaces: []string{va}, LoopCPUs: h.Online, BusyPollUsecs: 50, Somaxconn: -1})
		if err != nil {
			return err
		}
		for _, f := range devFiles {
			if writeTo(p, f) == nil {
				return fmt.Errorf("plan does not write %s: %v", f, targets(p))
			}
		}
		state := filepath.Join(t.TempDir(), "state.json")
		if _, err := Apply(p, tgt, state); err != nil {
			return err
		}
		if _, _, err := Revert(state, tgt); err != nil {
			return err
		}
		napi, err := nc.NAPI(id)
		if err != nil {
			return err
		}
		var errs []error
		for param, v := range want {
			if got, _ := napi.NAPIValue(param); got != v {
				errs = append(errs, fmt.Errorf("NAPI %d %s is %d after revert, was %d", id, param, got, v))
			}
		}
		for _, f := range devFiles {
			if b, err := os.ReadFile(filepath.Join(view, f)); err != nil || string(b) != devBefore[f] {
				errs = append(errs, fmt.Errorf("%s is %q after revert, was %q (%v)", f, b, devBefore[f], err))
			}
		}
		return errors.Join(errs...)
	})
	if errors.Is(err, errSkip) {
		t.Skip(skipWhy)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestNetnsRevertInterfaceRenamed applies a plan to a veth pair inside a
// namespace the test creates, renames one veth (down, ip link set name,
// up) and reverts: the kernel keeps the interface's ifindex and its tuned
// queue files under the new name, and revert restores them there, byte
// for byte, where it took them for gone and left them tuned.
func TestNetnsRevertInterfaceRenamed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace and write sysfs")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) not installed")
	}
	hostBefore := hostSettings(t)
	pid := os.Getpid()
	ns := fmt.Sprintf("spd-ren-%d", pid)
	va, vb, vc := fmt.Sprintf("srn%da", pid), fmt.Sprintf("srn%db", pid), fmt.Sprintf("srn%dc", pid)
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", ns).Run()
		hostAfter := hostSettings(t)
		for f, v := range hostBefore {
			if w, ok := hostAfter[f]; ok && w != v {
				t.Errorf("host setting %s changed: %q -> %q", f, v, w)
			}
		}
	})
	run(t, "ip", "-n", ns, "link", "add", va, "type", "veth", "peer", "name", vb)
	for _, v := range []string{va, vb} {
		run(t, "ip", "-n", ns, "link", "set", v, "up")
	}
	nsPath := veth.Path(ns)
	view := t.TempDir()
	state := filepath.Join(t.TempDir(), "state.json")
	// files are those of va the plan writes; read reads them under the
	// namespace view, each under va's name now.
	var files []string
	read := func(name string) map[string]string {
		t.Helper()
		m := map[string]string{}
		err := inNetNSView(nsPath, view, func() error {
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(view, strings.Replace(f, "/"+va+"/", "/"+name+"/", 1)))
				if err != nil {
					return err
				}
				m[f] = string(b)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	var before map[string]string
	err := inNetNSHost(nsPath, view, func(tgt Target, h *topo.Host) error {
		p, err := MakePlan(h, PlanConfig{Interfaces: []string{va, vb}, LoopCPUs: h.Online})
		if err != nil {
			return err
		}
		for _, w := range p.Writes {
			if w.Kind == KindFile && w.Iface == va {
				files = append(files, w.Path)
			}
		}
		if len(files) == 0 {
			return fmt.Errorf("plan writes no file of %s: %v", va, targets(p))
		}
		before = map[string]string{}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(view, f))
			if err != nil {
				return err
			}
			before[f] = string(b)
		}
		_, err = Apply(p, tgt, state)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, "ip", "-n", ns, "link", "set", va, "down")
	run(t, "ip", "-n", ns, "link", "set", va, "name", vc)
	run(t, "ip", "-n", ns, "link", "set", vc, "up")
	if tuned := read(vc); maps.Equal(tuned, before) {
		t.Fatalf("%s's files are as before apply after the rename: %q", vc, tuned)
	}
	var notes []string
	var gone int
	err = inNetNSHost(nsPath, view, func(tgt Target, _ *topo.Host) error {
		notes, gone, err = Revert(state, tgt)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if after := read(vc); !maps.Equal(after, before) {
		t.Errorf("%s's files after revert: %q, want %q", vc, after, before)
	}
	if gone != 0 || !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "named "+vc+" now") }) {
		t.Errorf("%d gone, notes %q: want none gone and a note of the rename", gone, notes)
	}
}

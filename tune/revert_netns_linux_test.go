//go:build linux

package tune

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/veth"
)

// TestRevertOtherNetNS: a plan applied to the live root ("/") from one
// network namespace (`ip netns exec A spindle tune plan --apply`) and
// reverted from another (a revert run without `ip netns exec A`, the
// state in the shared /run) must not write A's saved values into the
// other namespace's per-namespace files (/proc/sys/net, /sys/class/net),
// nor move the state aside as if A were restored.
func TestRevertOtherNetNS(t *testing.T) {
	ns, _ := somaxNetNS(t, "spd-rev")
	get := func(nsName string) string {
		t.Helper()
		var s string
		if err := InNetNS(veth.Path(nsName), func() error {
			b, err := os.ReadFile(somax)
			s = string(b)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	state := applySomax(t, ns[0])
	var notes []string
	err := InNetNS(veth.Path(ns[1]), func() error {
		var err error
		notes, _, err = Revert(state, Target{Root: "/"})
		return err
	})
	t.Logf("revert from the other namespace: notes %q, err %v", notes, err)
	if got := get(ns[1]); got != "2000\n" {
		t.Errorf("the other namespace's somaxconn = %q after the revert, was 2000: it got the saved value of the namespace the plan was applied in", strings.TrimSpace(got))
	}
	if err == nil {
		t.Errorf("revert from another network namespace succeeded")
	}
	if _, serr := os.Stat(state); errors.Is(serr, os.ErrNotExist) {
		t.Errorf("state moved aside, but the namespace it was applied in still has somaxconn %q", strings.TrimSpace(get(ns[0])))
	}
	// From the namespace it was applied in, the revert restores it.
	if err := InNetNS(veth.Path(ns[0]), func() error {
		_, _, err := Revert(state, Target{Root: "/"})
		return err
	}); err != nil {
		t.Fatalf("revert in the namespace applied in: %v", err)
	}
	if got := get(ns[0]); got != "1000\n" {
		t.Errorf("somaxconn = %q after the revert in its namespace, want 1000", got)
	}
}

// TestRevertNetNSNumberReused: the kernel frees a network namespace's
// inode number when the namespace goes and gives it to a later one (ip
// netns del gw, then ip netns add gw): a state applied in the first
// named the namespace by that number alone, so a revert in the second
// took it for the one applied in and wrote the first's saved values into
// its sysctls. The state here is the first namespace's with the second's
// number put in, as the kernel would hand it on; the netns cookie
// (SO_NETNS_COOKIE, never reused) tells them apart.
func TestRevertNetNSNumberReused(t *testing.T) {
	ns, inum := somaxNetNS(t, "spd-reuse")
	state := applySomax(t, ns[0])
	editState(t, state, func(m map[string]any) {
		if m["netns"] != inum[0] {
			t.Fatalf("state records netns %v, applied in %s", m["netns"], inum[0])
		}
		m["netns"] = inum[1]
	})
	var somax1 string
	err := InNetNS(veth.Path(ns[1]), func() error {
		_, _, err := Revert(state, Target{Root: "/"})
		b, rerr := os.ReadFile(somax)
		somax1 = strings.TrimSpace(string(b))
		return errors.Join(err, rerr)
	})
	if somax1 != "2000" {
		t.Errorf("the second namespace's somaxconn = %s after the revert, was 2000: it got the first's saved value", somax1)
	}
	if !errors.Is(err, ErrRefused) {
		t.Errorf("revert in a namespace that has the number of the one applied in: %v, want ErrRefused", err)
	}
	if _, serr := os.Stat(state); serr != nil {
		t.Errorf("state moved aside: %v", serr)
	}
}

// somax is the per-namespace sysctl the tests below apply and revert.
const somax = "/proc/sys/net/core/somaxconn"

// somaxNetNS makes two network namespaces named after prefix, removed
// when t ends, whose somaxconn are 1000 and 2000, and returns their names
// and numbers (the /proc/thread-self/ns/net link). It skips without root
// or ip.
func somaxNetNS(t *testing.T, prefix string) (ns, inum [2]string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) not installed")
	}
	for i := range ns {
		ns[i] = fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), i)
		run(t, "ip", "netns", "add", ns[i])
		name := ns[i]
		t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
		v := fmt.Sprint(1000 * (i + 1))
		if err := InNetNS(veth.Path(ns[i]), func() error {
			var err error
			if inum[i], err = os.Readlink("/proc/thread-self/ns/net"); err != nil {
				return err
			}
			return os.WriteFile(somax, []byte(v), 0)
		}); err != nil {
			t.Fatal(err)
		}
	}
	return ns, inum
}

// applySomax applies, in namespace ns, a plan raising somaxconn from 1000
// to 4096, and returns the state file's path.
func applySomax(t *testing.T, ns string) string {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state.json")
	p := &Plan{Policy: Inline, Writes: []Write{{Kind: KindFile, Path: somax, Format: FormatInt, Old: "1000\n", New: "4096", Reason: "test"}}}
	if err := InNetNS(veth.Path(ns), func() error {
		_, err := Apply(p, Target{Root: "/"}, state)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return state
}

// TestApplyRefusedWriteNamesValue: a write the kernel refuses at open (a
// read-only sysctl: EACCES even for root) is named in Apply's error with
// the value it tried, as a write refused by the file's store was; the
// earlier write, somaxconn in a namespace the test makes, is rolled back.
// The error named the file only (and a netlink write's, in
// TestApplyRollsBackOnFailure, the parameter only).
func TestApplyRefusedWriteNamesValue(t *testing.T) {
	ns, _ := somaxNetNS(t, "spd-ro")
	state := filepath.Join(t.TempDir(), "state.json")
	const ro = "/proc/sys/kernel/cap_last_cap" // 0444
	var after string
	var applyErr error
	if err := InNetNS(veth.Path(ns[0]), func() error {
		last, err := os.ReadFile(ro)
		if err != nil {
			return err
		}
		p := &Plan{Policy: Inline, Writes: []Write{
			{Kind: KindFile, Path: somax, Format: FormatInt, Old: "1000\n", New: "4096", Reason: "test"},
			{Kind: KindFile, Path: ro, Format: FormatInt, Old: string(last), New: "99", Reason: "test"},
		}}
		_, applyErr = Apply(p, Target{Root: "/"}, state)
		b, err := os.ReadFile(somax)
		after = string(b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if applyErr == nil || !strings.Contains(applyErr.Error(), ro) || !strings.Contains(applyErr.Error(), `"99"`) || !errors.Is(applyErr, os.ErrPermission) {
		t.Errorf("err = %v, want the file, the value \"99\" and EACCES", applyErr)
	}
	if after != "1000\n" {
		t.Errorf("somaxconn %q after the rollback, want 1000", after)
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left after a complete rollback: %v", err)
	}
}

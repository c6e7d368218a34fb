package tune

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spindlenet/spindle/internal/tunestate"
	"github.com/spindlenet/spindle/topo"
)

// Netlink reads and sets the netlink parameters a plan may write: ethtool
// coalescing and netdev per-NAPI settings. *topo.NetlinkClient implements
// it.
type Netlink interface {
	Coalesce(ifindex int) (topo.Coalesce, error)
	SetCoalesce(ifindex int, values map[string]uint32) error
	NAPI(id uint32) (topo.NAPI, error)
	SetNAPI(id uint32, param string, value uint64) error
}

// Target is where a plan is applied: a root directory for /proc and /sys
// ("/" live) and, for netlink writes, a Netlink.
type Target struct {
	// Root is prefixed to every file path.
	Root string
	// Netlink performs KindCoalesce and KindNAPI writes; nil refuses them.
	Netlink Netlink
}

// State is what Apply saves before writing and Revert restores.
type State struct {
	// Version of the state format (1).
	Version int `json:"version"`
	// Applied is when Apply started.
	Applied time.Time `json:"applied"`
	// Root is the Target root the plan was applied under.
	Root string `json:"root"`
	// BootID is the kernel's boot id (/proc/sys/kernel/random/boot_id
	// under Root) when Apply ran, "" where it could not be read: Revert
	// refuses a state from another boot.
	BootID string `json:"boot_id,omitempty"`
	// NetNS is the network namespace Apply ran in, as the kernel names
	// it (the link /proc/thread-self/ns/net under Root, "net:[4026531840]"),
	// "" where it could not be read (a captured tree): /proc/sys/net and
	// /sys/class/net are that namespace's, and Revert refuses to restore
	// them from another.
	NetNS string `json:"netns,omitempty"`
	// NetNSCookie is the cookie of that namespace (SO_NETNS_COOKIE, Linux
	// 5.14+), 0 where NetNS is "" or the kernel has none: the kernel
	// gives a deleted namespace's inode number to a later one, never its
	// cookie, and Revert refuses a state of another cookie.
	NetNSCookie uint64 `json:"netns_cookie,omitempty"`
	// Plan is the applied plan.
	Plan *Plan `json:"plan"`
	// Before holds, per write, the exact value found just before writing.
	Before []string `json:"before"`
}

// ValidateWrite refuses writes outside /proc and /sys, with relative or
// unclean paths, unknown kinds or formats, and values that do not parse
// in their format.
func ValidateWrite(w Write) error {
	switch w.Kind {
	case KindFile:
		if !path.IsAbs(w.Path) || path.Clean(w.Path) != w.Path || strings.Contains(w.Path, "..") {
			return refuse("path %q is not a clean absolute path", w.Path)
		}
		if !strings.HasPrefix(w.Path, "/proc/") && !strings.HasPrefix(w.Path, "/sys/") {
			return refuse("path %q is outside /proc and /sys", w.Path)
		}
		if (w.Ifindex != 0 || w.Iface != "") && (w.Ifindex <= 0 || w.Iface == "" || strings.Contains(w.Iface, "/") || !w.ifaceFile() && !w.ifaceIRQ()) {
			return refuse("%s: interface %q (ifindex %d) is not the file's, nor its IRQ handler's", w.Path, w.Iface, w.Ifindex)
		}
	case KindCoalesce:
		if w.Ifindex <= 0 || w.Iface == "" {
			return refuse("coalesce write without interface")
		}
		if !slices.Contains(topo.CoalesceAttrNames(), w.Param) {
			return refuse("unknown coalescing parameter %q", w.Param)
		}
		if _, err := strconv.ParseUint(strings.TrimSpace(w.New), 10, 32); err != nil {
			return refuse("coalesce %s value %q is not a number", w.Param, w.New)
		}
	case KindNAPI:
		if w.NAPIID < 1 {
			return refuse("napi write without NAPI id")
		}
		if !slices.Contains(topo.NAPIParams, w.Param) {
			return refuse("unknown NAPI parameter %q", w.Param)
		}
		if _, err := strconv.ParseUint(strings.TrimSpace(w.New), 10, 64); err != nil {
			return refuse("napi %s value %q is not a number", w.Param, w.New)
		}
	default:
		return refuse("unknown write kind %q", w.Kind)
	}
	if w.IRQName != "" && (w.Kind != KindFile || !strings.HasPrefix(w.Path, "/proc/irq/") || !validIRQName(w.IRQName)) {
		return refuse("%s: IRQ handler name %q for no IRQ, or not one the kernel shows", w.Target(), w.IRQName)
	}
	if _, ok, err := parseCPUs(w.Format, w.New); err != nil {
		return refuse("%s: %v", w.Target(), err)
	} else if !ok && w.Format != FormatInt {
		return refuse("%s: unknown format %q", w.Target(), w.Format)
	}
	if w.Format == FormatInt {
		// A decimal integer, signed (some sysctls take -1) or as large
		// as an unsigned long.
		if _, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(w.New), "-"), 10, 64); err != nil {
			return refuse("%s: value %q is not a number", w.Target(), w.New)
		}
	}
	return nil
}

// ifaceFile reports whether w writes a file of its interface,
// /sys/class/net/<Iface>/....
func (w Write) ifaceFile() bool { return strings.HasPrefix(w.Path, "/sys/class/net/"+w.Iface+"/") }

// ifaceIRQ reports whether w writes the affinity of an IRQ whose handler
// is named after its interface ("ice-ens1f0-TxRx-0").
func (w Write) ifaceIRQ() bool {
	return strings.HasPrefix(w.Path, "/proc/irq/") && w.Iface != "" && strings.Contains(w.IRQName, w.Iface)
}

// onlineCPUs reads the CPUs online under the target.
func (t Target) onlineCPUs() (topo.CPUSet, error) {
	b, err := os.ReadFile(filepath.Join(t.Root, "/sys/devices/system/cpu/online"))
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	return topo.ParseCPUList(string(b))
}

// checkCPUs refuses a plan whose CPU values name CPUs that are not online
// under the target (a plan made on another host, or edited by hand).
func checkCPUs(p *Plan, t Target) error {
	online, err := t.onlineCPUs()
	if err != nil {
		return err
	}
	for _, w := range p.Writes {
		set, ok, _ := parseCPUs(w.Format, w.New)
		if !ok {
			continue
		}
		if bad := set.Minus(online); bad.Len() > 0 {
			return refuse("%s: CPUs %s are not online on this machine (online: %s)", w.Target(), bad, online)
		}
	}
	return nil
}

// checkOnce refuses a plan that writes one target twice (MakePlan plans
// each once; a plan edited by hand may not): only the last write would
// hold, and Revert, finding it where it saved the first write's value,
// would name the target as changed since the apply. Apply checks it, not
// Validate, so that a state saved with such a plan still loads and
// reverts.
func checkOnce(p *Plan) error {
	seen := map[string]int{}
	for i, w := range p.Writes {
		key := w.Target()
		switch w.Kind {
		case KindCoalesce:
			key = fmt.Sprintf("%s %d %s", w.Kind, w.Ifindex, w.Param)
		case KindNAPI:
			key = fmt.Sprintf("%s %d %s", w.Kind, w.NAPIID, w.Param)
		}
		if j, ok := seen[key]; ok {
			return refuse("%s is written twice (writes %d and %d): only the last would hold; a plan writes each target once", w.Target(), j+1, i+1)
		}
		seen[key] = i
	}
	return nil
}

// Validate checks every write of p.
func Validate(p *Plan) error {
	if p == nil {
		return refuse("no plan")
	}
	for i, w := range p.Writes {
		if err := ValidateWrite(w); err != nil {
			return fmt.Errorf("write %d: %w", i+1, err)
		}
	}
	return nil
}

func (t Target) read(w Write) (string, error) {
	switch w.Kind {
	case KindFile:
		name, err := t.filePath(w)
		if err != nil {
			return "", err
		}
		f, err := openUnder(t.Root, name, os.O_RDONLY)
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		return string(b), err
	case KindCoalesce:
		if t.Netlink == nil {
			return "", fmt.Errorf("%s: %w: no netlink", w.Target(), topo.ErrNotSupported)
		}
		c, err := t.Netlink.Coalesce(w.Ifindex)
		if err != nil {
			return "", err
		}
		v, ok := c[w.Param]
		if !ok {
			return "", fmt.Errorf("%s: %w by the driver", w.Target(), topo.ErrNotSupported)
		}
		return strconv.FormatUint(uint64(v), 10), nil
	case KindNAPI:
		if t.Netlink == nil {
			return "", fmt.Errorf("%s: %w: no netlink", w.Target(), topo.ErrNotSupported)
		}
		n, err := t.Netlink.NAPI(w.NAPIID)
		if err != nil {
			return "", err
		}
		if w.Ifindex > 0 && n.Ifindex != w.Ifindex {
			// NAPI ids are re-allocated (link down/up, channels, GRO on
			// a veth): this id now names another interface's instance.
			return "", fmt.Errorf("NAPI %d now belongs to ifindex %d, not %s (%d): %w", w.NAPIID, n.Ifindex, w.Iface, w.Ifindex, os.ErrNotExist)
		}
		v, err := n.NAPIValue(w.Param)
		return strconv.FormatUint(v, 10), err
	}
	return "", refuse("unknown write kind %q", w.Kind)
}

// sameIRQ checks that the IRQ whose affinity w writes still has w's
// handler (w.IRQName). The kernel shows each handler of IRQ N as a
// directory /proc/irq/N/<name>; other handlers and not w's mean the number
// was freed and given to another device's interrupt since the plan was
// made: an error wrapping fs.ErrNotExist, as for an IRQ freed. No handler
// at all (drivers free their IRQs while the interface is down, and the
// affinity written holds when they request them again) is the same IRQ.
func (t Target) sameIRQ(w Write) error {
	if w.IRQName == "" {
		return nil
	}
	ents, err := os.ReadDir(filepath.Join(t.Root, path.Dir(w.Path)))
	if err != nil {
		return nil // reading the file itself says what is wrong
	}
	var others []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if e.Name() == w.IRQName {
			return nil
		}
		others = append(others, e.Name())
	}
	if len(others) == 0 {
		return nil
	}
	// A driver that names its handlers after the interface (ice, i40e,
	// ixgbe) requests them again under the new name when a renamed
	// interface comes up: the same IRQ.
	if name, err := t.renamed(w); err == nil && name != "" && w.ifaceIRQ() && slices.Contains(others, strings.ReplaceAll(w.IRQName, w.Iface, name)) {
		return nil
	}
	return fmt.Errorf("IRQ %s now serves %s, not %s: %w", path.Base(path.Dir(w.Path)), strings.Join(others, ", "), w.IRQName, fs.ErrNotExist)
}

// ifaceName returns the name under which w's interface (of a file it
// writes, or of an IRQ's handler) is found now: the one with the ifindex it had when planned
// (w.Ifindex). An interface renamed since (ip link set dev NAME name NEW,
// a udev rule) keeps its ifindex, and its files, with the values written,
// are under its new name. An interface deleted and another made under its
// name (a veth pair re-created, a driver rebound) is not the one the plan
// was made for, nor the one whose value Apply saved: an error wrapping
// fs.ErrNotExist, as for an interface gone. Where no ifindex can be read
// the name is w's, and reading the file says what is wrong.
func (t Target) ifaceName(w Write) (string, error) {
	dir := filepath.Join(t.Root, "/sys/class/net")
	now, err := readIfindex(dir, w.Iface)
	if err == nil && now == w.Ifindex {
		return w.Iface, nil
	}
	if ents, rerr := os.ReadDir(dir); rerr == nil {
		for _, e := range ents {
			if n, nerr := readIfindex(dir, e.Name()); nerr == nil && n == w.Ifindex {
				return e.Name(), nil
			}
		}
	}
	if err == nil {
		return "", fmt.Errorf("%s is ifindex %d now, not %d: another interface under its name: %w", w.Iface, now, w.Ifindex, fs.ErrNotExist)
	}
	return w.Iface, nil
}

// renamed returns the name w's interface has now when it is not the one
// w was planned with, "" when it is or w names no interface's file or IRQ.
func (t Target) renamed(w Write) (string, error) {
	if w.Kind != KindFile || w.Ifindex <= 0 {
		return "", nil
	}
	name, err := t.ifaceName(w)
	if err != nil || name == w.Iface {
		return "", err
	}
	return name, nil
}

// readIfindex reads the ifindex of interface name under dir
// (/sys/class/net).
func readIfindex(dir, name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, name, "ifindex"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// filePath returns the file w writes, under the target's root: for a file
// of an interface, under the name the interface has now (ifaceName), and
// an error wrapping fs.ErrNotExist where w's IRQ or interface is another
// now (sameIRQ, ifaceName).
func (t Target) filePath(w Write) (string, error) {
	if err := t.sameIRQ(w); err != nil {
		return "", err
	}
	p := w.Path
	if w.Ifindex > 0 && w.ifaceFile() {
		name, err := t.ifaceName(w)
		if err != nil {
			return "", err
		}
		p = "/sys/class/net/" + name + strings.TrimPrefix(w.Path, "/sys/class/net/"+w.Iface)
	}
	return filepath.Join(t.Root, p), nil
}

func (t Target) write(w Write, value string) error {
	switch w.Kind {
	case KindFile:
		name, err := t.filePath(w)
		if err != nil {
			return err
		}
		return refusal(w, writeFile(t.Root, name, value))
	case KindCoalesce:
		if t.Netlink == nil {
			return fmt.Errorf("%s: %w: no netlink", w.Target(), topo.ErrNotSupported)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(value), 10, 32)
		if err != nil {
			return fmt.Errorf("%s: %w", w.Target(), err)
		}
		return t.Netlink.SetCoalesce(w.Ifindex, map[string]uint32{w.Param: uint32(v)})
	case KindNAPI:
		if t.Netlink == nil {
			return fmt.Errorf("%s: %w: no netlink", w.Target(), topo.ErrNotSupported)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", w.Target(), err)
		}
		return t.Netlink.SetNAPI(w.NAPIID, w.Param, v)
	}
	return refuse("unknown write kind %q", w.Kind)
}

// refusal wraps err, a file write's failure, with what the kernel's
// refusal means where it refuses for a reason of its own that its errno
// does not say: an IRQ affinity user space may not set (write_irq_affinity:
// irq_can_set_affinity_usr is false for a managed interrupt, whose
// affinity the kernel spreads itself, and for one its chip cannot move;
// EPERM since Linux 6.12, EIO before), and an RPS map
// left with no CPU once the kernel took out the isolcpus= domain and
// nohz_full CPUs (rps_cpumask_housekeeping: EINVAL; cpuset partitions do
// not count there). Other errors, and nil, are returned as they are.
func refusal(w Write, err error) error {
	if err == nil {
		return nil
	}
	base := path.Base(w.Path)
	switch {
	case strings.HasPrefix(w.Path, "/proc/irq/") && (base == "smp_affinity" || base == "smp_affinity_list") &&
		(errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EIO)):
		irq := path.Base(path.Dir(w.Path))
		return fmt.Errorf("%w: the kernel lets no one set IRQ %s's affinity: a managed interrupt, which the kernel spreads over the CPUs itself, or one its chip cannot move (its smp_affinity files read-only; EPERM, EIO before Linux 6.12); leave it out (--exclude-irqs %s)", err, irq, irq)
	case strings.HasPrefix(w.Path, "/sys/class/net/") && base == "rps_cpus" && errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("%w: the kernel takes isolcpus= (domain) and nohz_full CPUs out of an RPS map and refuses one left empty; make a new plan on this host, which keeps RPS off them", err)
	}
	return err
}

// openUnder opens name, a file under root, with flag. Under a captured
// tree (a root other than "/") name is resolved within root, as os.Root
// does: a link in the tree that leads out of it, absolute or through
// "..", is an error, where following it would read or write the live
// host's file (a hand-made tree whose proc/sys links to /proc/sys). Links
// within the tree (sysfs's relative ones, /sys/class/net/IF to
// ../../devices/...) are followed.
func openUnder(root, name string, flag int) (*os.File, error) {
	if IsLive(root) {
		return os.OpenFile(name, flag, 0)
	}
	rel, err := filepath.Rel(root, name)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("not under the root %s", root)}
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(rel, flag, 0)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		pe.Path = name // the tree's file, as the messages name it
	}
	return f, err
}

// writeFile writes value to the existing file name under root, as a sysfs
// or procfs store takes it: opened without creating (openUnder),
// truncated, one write. Tests replace it to stand for what the kernel
// makes of a write (a sysfs store that keeps only some of the CPUs
// written), which a fixture file cannot.
var writeFile = func(root, name, value string) error {
	f, err := openUnder(root, name, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(value))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// setAndCheck writes value and reads it back; the kernel must hold it.
func (t Target) setAndCheck(w Write, value string) error {
	if err := t.write(w, value); err != nil {
		return err
	}
	got, err := t.read(w)
	if err != nil {
		return fmt.Errorf("%s: read back: %w", w.Target(), err)
	}
	if !equalValues(w.Format, got, value) {
		return fmt.Errorf("%s: wrote %q, reads back %q", w.Target(), strings.TrimSpace(value), strings.TrimSpace(got))
	}
	return nil
}

// ErrStale means the host changed since the plan was made.
var ErrStale = errors.New("plan is stale")

// Apply applies p to t. It refuses a plan that writes a target twice
// (ErrRefused). It first checks that every current value is still the
// plan's Old value and every target still exists, an interface under the
// name planned (else ErrStale and nothing is written), and that each is a
// value of its write's format, which Revert can write back (else
// ErrRefused), saves them to statePath (which must not exist), then
// writes in order, reading each value back. If a write fails, the writes
// already done are restored in reverse order and the state file is
// removed; the error says what failed, whether the rollback was complete
// and which targets it left as they are (gone since they were written, or
// RPS and XPS maps back without CPUs gone offline). A plan without writes saves no state file. While it works it
// holds the lock of statePath (lockState), as Revert does: a run that
// finds it held is refused at once (ErrRefused), writing nothing.
func Apply(p *Plan, t Target, statePath string) (*State, error) {
	if err := Validate(p); err != nil {
		return nil, err
	}
	if err := checkOnce(p); err != nil {
		return nil, err
	}
	if err := checkCPUs(p, t); err != nil {
		return nil, err
	}
	st := &State{Version: 1, Applied: time.Now().UTC(), Root: t.Root, BootID: t.bootID(), NetNS: t.netNS(), Plan: p}
	if st.NetNS != "" {
		st.NetNSCookie = netnsCookie()
	}
	if len(p.Writes) > 0 {
		if err := makeStateDir(statePath); err != nil {
			return nil, err
		}
		unlock, err := lockState(statePath)
		if err != nil {
			return nil, err
		}
		defer unlock()
		// Before the values: a plan applied again, or another applied
		// and not reverted, finds values it did not expect, and "stale,
		// make a new plan" would start one from the tuned values.
		if _, err := os.Lstat(statePath); err == nil {
			return nil, stateExists(statePath)
		}
	}
	for i, w := range p.Writes {
		cur, err := t.read(w)
		if gone(err) {
			return nil, fmt.Errorf("%w: %s no longer exists (%w); make a new plan", ErrStale, w.Target(), err)
		}
		if err != nil {
			return nil, fmt.Errorf("write %d (%s): %w", i+1, w.Target(), err)
		}
		if cur != w.Old {
			return nil, fmt.Errorf("%w: %s is %q, the plan expected %q; make a new plan", ErrStale, w.Target(), strings.TrimSpace(cur), strings.TrimSpace(w.Old))
		}
		// The plan names the interface as it was: renamed since, it is
		// not the host the plan was reviewed for.
		if name, err := t.renamed(w); err == nil && name != "" {
			return nil, fmt.Errorf("%w: %s (ifindex %d) is named %s now; make a new plan", ErrStale, w.Iface, w.Ifindex, name)
		}
		// Revert writes it back, and LoadState refuses a saved value not
		// in its write's format.
		if err := validateSaved(w, cur); err != nil {
			return nil, fmt.Errorf("write %d: current value: %w", i+1, err)
		}
		st.Before = append(st.Before, cur)
	}
	if len(p.Writes) == 0 {
		return st, nil // nothing to save, nothing to revert
	}
	if err := saveState(statePath, st); err != nil {
		return nil, err
	}
	for i, w := range p.Writes {
		if err := t.setAndCheck(w, w.New); err != nil {
			// With the value tried: an error of the open (a read-only
			// sysctl, EACCES) or of a netlink write does not name it.
			failure := fmt.Errorf("write %d of %d (%s, value %q): %w", i+1, len(p.Writes), w.Target(), strings.TrimSpace(w.New), err)
			vanished, partial, rerr := rollback(t, p.Writes[:i+1], st.Before[:i+1])
			// Targets gone since they were written, and RPS or XPS maps
			// back without CPUs gone offline, are not as they were: the
			// message names them rather than claim a full rollback.
			var except string
			slices.Reverse(vanished) // plan order, as Revert's notes
			slices.Reverse(partial)
			if left := append(vanished, partial...); len(left) > 0 {
				except = fmt.Sprintf(" (but for %d target(s): %s)", len(left), strings.Join(left, "; "))
			}
			if rerr != nil {
				return nil, fmt.Errorf("%w; rollback incomplete, state kept in %s: %v%s", failure, statePath, rerr, except)
			}
			if err := os.Remove(statePath); err != nil {
				return nil, fmt.Errorf("%w; rolled back%s, but removing %s: %v", failure, except, statePath, err)
			}
			switch {
			case except != "":
				return nil, fmt.Errorf("%w; rolled back%s", failure, except)
			case i == 0:
				return nil, fmt.Errorf("%w; nothing was changed", failure)
			}
			return nil, fmt.Errorf("%w; all earlier writes rolled back", failure)
		}
	}
	return st, nil
}

// bootID returns the boot id under the target, "" when it cannot be read
// (a captured tree without it).
func (t Target) bootID() string { return tunestate.BootID(t.Root) }

// netNS returns the network namespace of the calling thread as seen under
// the target ("net:[4026531840]"), "" when it cannot be read (a captured
// tree without it).
func (t Target) netNS() string {
	s, err := os.Readlink(filepath.Join(t.Root, "/proc/thread-self/ns/net"))
	if err != nil {
		return ""
	}
	return s
}

// gone reports whether err means the write's target no longer exists: a
// file under /proc or /sys that is not there (an interface deleted, an IRQ
// freed when its driver unbound), a NAPI id the kernel no longer knows or
// that names another interface's instance now (ENOENT), an interface
// ethtool no longer finds (ENODEV). There is nothing left to restore.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}

// rollback restores before[i] for writes in reverse order, checking each
// value byte for byte. It goes on past failures: targets that no longer
// exist are listed in vanished (with the reason), RPS and XPS maps that
// read back without CPUs gone offline since (offlineDropped) in partial,
// every other failure is in err, one wrapped error per target.
func rollback(t Target, writes []Write, before []string) (vanished, partial []string, err error) {
	var errs []error
	for i := len(writes) - 1; i >= 0; i-- {
		w := writes[i]
		cur, err := t.read(w)
		if gone(err) {
			vanished = append(vanished, fmt.Sprintf("%s: gone (%v)", w.Target(), err))
			continue
		}
		if err == nil && cur == before[i] {
			continue // never written, or already back
		}
		if err := t.write(w, before[i]); err != nil {
			if gone(err) {
				vanished = append(vanished, fmt.Sprintf("%s: gone (%v)", w.Target(), err))
				continue
			}
			if oe := offlineIRQ(t, w, before[i], err); oe != nil {
				errs = append(errs, oe)
				continue
			}
			errs = append(errs, fmt.Errorf("%s: restore %q: %w", w.Target(), strings.TrimSpace(before[i]), err))
			continue
		}
		got, err := t.read(w)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: read back: %w", w.Target(), err))
			continue
		}
		if w.Kind == KindFile && got != before[i] || w.Kind != KindFile && strings.TrimSpace(got) != strings.TrimSpace(before[i]) {
			if note, ok := offlineDropped(t, w, before[i], got); ok {
				partial = append(partial, note)
				continue
			}
			if oe := offlineIRQ(t, w, before[i], fmt.Errorf("reads back %q", strings.TrimSpace(got))); oe != nil {
				errs = append(errs, oe)
				continue
			}
			errs = append(errs, fmt.Errorf("%s: restored %q, reads back %q", w.Target(), before[i], got))
		}
	}
	return vanished, partial, errors.Join(errs...)
}

// offlineDropped reports whether got, read back from an RPS or XPS map
// after writing want, is want without the CPUs that are offline now, with
// a note saying so. The kernel keeps only online CPUs in those maps
// (store_rps_map builds the RPS map with for_each_cpu_and(cpu, mask,
// cpu_online_mask); __netif_set_xps_queue maps only online CPUs) and the
// files read back the map, so a CPU that went offline after Apply cannot
// be restored until it is back online; writing again would never change
// that, and the revert is as complete as the host allows.
func offlineDropped(t Target, w Write, want, got string) (note string, ok bool) {
	if w.Kind != KindFile || w.Format != FormatMask {
		return "", false
	}
	if base := path.Base(w.Path); base != "rps_cpus" && base != "xps_cpus" {
		return "", false
	}
	wantSet, _, err := parseCPUs(w.Format, want)
	if err != nil {
		return "", false
	}
	gotSet, _, err := parseCPUs(w.Format, got)
	if err != nil {
		return "", false
	}
	online, err := t.onlineCPUs()
	if err != nil {
		return "", false
	}
	offline := wantSet.Minus(online)
	if offline.Len() == 0 || !gotSet.Equal(wantSet.Intersect(online)) {
		return "", false
	}
	return fmt.Sprintf("%s: restored %s, reads back %s: CPUs %s are offline, and the kernel keeps offline CPUs out of RPS and XPS maps; write the map again once they are back online", w.Target(), orNone(wantSet.String()), orNone(gotSet.String()), offline), true
}

// offlineIRQError is an IRQ affinity rollback could not restore because
// every CPU of its saved value is offline now: the kernel refuses an
// affinity without an online CPU (write_irq_affinity: EINVAL), so no
// revert can restore it until one of them is back online.
type offlineIRQError struct {
	// IRQ is the interrupt's number.
	IRQ string
	// Path is the file written, /proc/irq/N/smp_affinity or
	// smp_affinity_list.
	Path string
	// Saved is the value saved by Apply, as the file shows it.
	Saved string
	// CPUs are the CPUs of Saved, every one of them offline.
	CPUs topo.CPUSet
	// Err is what the write, or the read back, met.
	Err error
}

func (e *offlineIRQError) Error() string {
	return fmt.Sprintf("IRQ %s (%s): saved affinity %s not restored: its CPUs (%s) are all offline now, and the kernel takes no IRQ affinity without an online CPU (%v); write it once they are back online (echo %s > %s)", e.IRQ, e.Path, e.Saved, e.CPUs, e.Err, e.Saved, e.Path)
}

func (e *offlineIRQError) Unwrap() error { return e.Err }

// offlineIRQ returns, for an IRQ affinity write whose restore of saved
// met err, an offlineIRQError when no CPU of saved is online under the
// target, nil otherwise.
func offlineIRQ(t Target, w Write, saved string, err error) *offlineIRQError {
	if w.Kind != KindFile || !strings.HasPrefix(w.Path, "/proc/irq/") {
		return nil
	}
	if base := path.Base(w.Path); base != "smp_affinity" && base != "smp_affinity_list" {
		return nil
	}
	set, ok, perr := parseCPUs(w.Format, saved)
	if !ok || perr != nil || set.Len() == 0 {
		return nil
	}
	online, oerr := t.onlineCPUs()
	if oerr != nil || set.Intersect(online).Len() > 0 {
		return nil
	}
	return &offlineIRQError{IRQ: path.Base(path.Dir(w.Path)), Path: w.Path, Saved: strings.TrimSpace(saved), CPUs: set, Err: err}
}

// onlyOfflineIRQs reports whether every error err joins is an
// offlineIRQError.
func onlyOfflineIRQs(err error) bool {
	for _, e := range joined(err) {
		var oe *offlineIRQError
		if !errors.As(e, &oe) {
			return false
		}
	}
	return true
}

// saveState writes st to statePath, refusing if the file exists (a plan
// applied and not reverted). The file appears whole or not at all: st is
// written and synced to a temporary file in the same directory, which is
// then hard-linked to statePath (link fails if statePath exists, as an
// O_EXCL create would; renamed where the file system has no hard links),
// so a reader such as the engine's tunestate.LoopCPUs never sees it empty
// or cut short. Every user may read it (mode 0644, in a directory
// makeStateDir creates): the engine of a service running as its own user
// reads the loop CPUs there, and the state shows nothing /proc and /sys
// do not.
func saveState(statePath string, st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(statePath)
	if err := makeStateDir(statePath); err != nil {
		return err
	}
	if _, err := os.Lstat(statePath); err == nil {
		return stateExists(statePath)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(statePath)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	err = linkFile(f.Name(), statePath)
	if errors.Is(err, os.ErrExist) {
		return stateExists(statePath)
	}
	if err != nil {
		// A file system without hard links (vfat, some FUSE): rename,
		// still whole or nothing for a reader; only the check above
		// refuses an existing state there.
		return os.Rename(f.Name(), statePath)
	}
	return nil
}

// makeStateDir creates statePath's directory when it is missing, mode
// 0755 whatever the umask (a hardened root's 077 would leave it 0700), so
// that every user may read the state in it (saveState).
func makeStateDir(statePath string) error {
	dir := filepath.Dir(statePath)
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil // there, or an error the use of it reports
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// lockState takes the lock of statePath, whose directory must exist, so
// that one Apply or Revert at a time works with the state: a revert while
// an apply writes would restore what was written so far and move the
// state aside, and the apply would then write the rest with no state left
// to revert it. The lock is an exclusive flock of the file .NAME.lock
// beside the state NAME, made mode 0600: not of the directory, which
// every user may open (makeStateDir makes it 0755 for the services that
// read the state), and flock needs no more than an open descriptor, so
// any user could hold it and refuse every apply and revert. A link in its
// place is not followed. Another run holding the lock is refused at once;
// a file system that cannot lock leaves the work unlocked. unlock
// releases it; the lock also goes with the process.
func lockState(statePath string) (unlock func(), err error) {
	lock := filepath.Join(filepath.Dir(statePath), "."+filepath.Base(statePath)+".lock")
	f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	err = flockFile(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, refuse("another spindle tune apply or revert is running with the state %s; try again once it is done", statePath)
	}
	// Any other error is a file system that cannot lock (NFS without
	// its lock manager: ENOLCK): the work goes on unlocked, as a
	// --state there must not stop tuning.
	return func() { f.Close() }, nil
}

// flockFile is syscall.Flock; tests replace it to stand for a file system
// without flock.
var flockFile = syscall.Flock

// linkFile is os.Link; tests replace it to stand for a file system
// without hard links.
var linkFile = os.Link

func stateExists(statePath string) error {
	return refuse("state file %s exists: an applied plan has not been reverted (run `spindle tune revert --state %s`, or choose another --state)", statePath, statePath)
}

// ErrReverted means the state file was reverted already: Revert moved it
// to its name with ".reverted" added, and there is nothing left to revert.
var ErrReverted = errors.New("reverted already")

// LoadState reads a state file written by Apply. Unknown fields are errors,
// and so is anything after the state's JSON object but white space (a
// second state appended would otherwise be ignored, and never reverted).
// A missing file is an fs.ErrNotExist whose message says whether the state
// was reverted already (Revert moved it to statePath+".reverted"), in
// which case it wraps ErrReverted too.
func LoadState(statePath string) (*State, error) {
	f, err := os.Open(statePath)
	if errors.Is(err, fs.ErrNotExist) {
		if _, rerr := os.Stat(statePath + ".reverted"); rerr == nil {
			return nil, fmt.Errorf("no state file %s: it was %w (%s.reverted holds it): %w", statePath, ErrReverted, statePath, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("no state file %s: nothing was applied with this state path: %w", statePath, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var st State
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("%s: %w", statePath, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: more data after the state (one state per file)", statePath)
	}
	if st.Version != 1 || st.Plan == nil || len(st.Before) != len(st.Plan.Writes) {
		return nil, fmt.Errorf("%s: not a spindle tune state file (version %d)", statePath, st.Version)
	}
	if err := Validate(st.Plan); err != nil {
		return nil, fmt.Errorf("%s: %w", statePath, err)
	}
	for i, w := range st.Plan.Writes {
		if err := validateSaved(w, st.Before[i]); err != nil {
			return nil, fmt.Errorf("%s: saved value of write %d: %w", statePath, i+1, err)
		}
	}
	return &st, nil
}

// validateSaved checks v, the value w's target had before Apply, as the
// write Revert makes of it: a value of w's format, to w's target.
func validateSaved(w Write, v string) error {
	w.New = v
	return ValidateWrite(w)
}

// Revert restores the values saved in statePath, in reverse order, and
// verifies each byte for byte. It restores everything it can: a target
// that no longer exists (an interface deleted, /proc/irq/N freed by a
// driver unbind, NAPI ids re-allocated after link down/up) has nothing to
// restore and does not stop the others. The notes say, one line per
// target, which values someone else changed since Apply (restored too),
// which interfaces were renamed (found by the ifindex planned, their files
// and the IRQs named after them restored under the new name) and which
// targets are gone (not restored); a target still at its saved value (one
// a crashed or stopped Apply never wrote) has nothing to note. An RPS or
// XPS map that reads back without CPUs that are offline now is restored
// as far as the kernel allows (it keeps offline CPUs out of those maps); a
// note names the CPUs left out. An IRQ affinity whose saved CPUs are
// all offline now cannot be restored (the kernel refuses it): the error
// names each (an offlineIRQError, with the saved value), and when nothing
// else failed the state file is moved aside all the same, since no
// revert could restore them while the CPUs stay offline. When every
// target that still exists is restored, the state
// file is renamed to statePath+".reverted", so that the host can be tuned
// again, and the notes say so if any target was gone. Otherwise the error
// lists each value that could not be restored and why, and the state file
// is kept for another try. gone counts the targets that no longer exist.
//
// A state saved in another boot than the target's (both boot ids known)
// is refused as stale, with nothing written and the file kept: the reboot
// reset every value the plan wrote, and IRQ numbers and NAPI ids may name
// other devices now, so the saved values would only overwrite what the new
// boot set. A state saved in another network namespace than the calling
// thread's (both known) is refused (ErrRefused), with nothing written and
// the file kept: /proc/sys/net and /sys/class/net are per namespace, so
// the saved values would go to this namespace's sysctls and same-named
// interfaces, and the namespace the plan was applied in would keep its.
// A namespace is known by its inode number and, where the kernel has it,
// its cookie: a deleted namespace's number goes to later ones.
func Revert(statePath string, t Target) (notes []string, gone int, err error) {
	unlock, err := lockState(statePath)
	if err != nil {
		return nil, 0, err
	}
	defer unlock()
	st, err := LoadState(statePath)
	if err != nil {
		return nil, 0, err
	}
	if now := t.bootID(); st.BootID != "" && now != "" && now != st.BootID {
		return nil, 0, fmt.Errorf("%w: %s was saved in another boot (boot id %s, now %s): the reboot reset what the plan wrote, and IRQ numbers and NAPI ids may name other devices now; nothing restored (remove the file to apply a plan again)", ErrStale, statePath, st.BootID, now)
	}
	if now := t.netNS(); st.NetNS != "" && now != "" && now != st.NetNS {
		// /proc/sys/net and /sys/class/net are per namespace: the saved
		// values would go to this namespace's sysctls and to its
		// interfaces of the same names, and the namespace the plan was
		// applied in would keep them.
		return nil, 0, fmt.Errorf("%w: %s was applied in network namespace %s, and this is %s: its sysctls and interfaces are not the ones the plan wrote; nothing restored (revert from that namespace: ip netns exec NAME spindle tune revert)", ErrRefused, statePath, st.NetNS, now)
	}
	if now := netnsCookie(); st.NetNSCookie != 0 && now != 0 && now != st.NetNSCookie && t.netNS() != "" {
		// The same inode number, another namespace: the one applied in
		// is gone, with its per-namespace values, and the kernel gave
		// its number to this one.
		return nil, 0, fmt.Errorf("%w: %s was applied in network namespace %s (cookie %d), and this one has its number but cookie %d: that namespace was deleted, and its sysctls and interfaces with it; nothing restored, and the file is kept: it holds the saved values of any IRQ affinities the plan wrote, which are not per namespace", ErrRefused, statePath, st.NetNS, st.NetNSCookie, now)
	}
	if IsLive(st.Root) != IsLive(t.Root) {
		// A captured tree's saved values are not the live host's, nor
		// the other way round (a root moved from tree to tree is let
		// be: the tree is the same).
		return nil, 0, fmt.Errorf("%w: %s was applied under %s, and this revert is under %s: one is the live host, the other a captured tree; nothing restored", ErrRefused, statePath, rootName(st.Root), rootName(t.Root))
	}
	renamed := map[string]bool{}
	for i, w := range st.Plan.Writes {
		if name, err := t.renamed(w); err == nil && name != "" && !renamed[w.Iface] {
			renamed[w.Iface] = true
			notes = append(notes, fmt.Sprintf("%s (ifindex %d) is named %s now: what the plan wrote of it is restored under that name", w.Iface, w.Ifindex, name))
		}
		cur, err := t.read(w)
		if err != nil {
			continue // gone or unreadable: rollback says which
		}
		if cur == st.Before[i] {
			continue // never written (Apply stopped before it), or already back
		}
		if !equalValues(w.Format, cur, w.New) {
			notes = append(notes, fmt.Sprintf("%s is %q, applied %q (changed since)", w.Target(), strings.TrimSpace(cur), w.New))
		}
	}
	vanished, partial, err := rollback(t, st.Plan.Writes, st.Before)
	slices.Reverse(vanished) // plan order, like the drift notes
	slices.Reverse(partial)
	notes = append(notes, vanished...)
	notes = append(notes, partial...)
	if err != nil && onlyOfflineIRQs(err) {
		// Nothing but IRQs on offline CPUs is left: another revert
		// would fail on them the same way for as long as the CPUs stay
		// offline, and keep the host from being tuned again. The state
		// goes aside as for a complete revert, and the error names each
		// with its saved value.
		if rerr := os.Rename(statePath, statePath+".reverted"); rerr != nil {
			return notes, len(vanished), errors.Join(err, rerr)
		}
		n := len(joined(err))
		return notes, len(vanished), fmt.Errorf("revert incomplete: %d of %d value(s) not restored, IRQ affinities whose saved CPUs are all offline; everything else that still exists is restored, and the state is moved to %s.reverted, as no revert can restore them while those CPUs are offline:\n%w", n, len(st.Plan.Writes), statePath, err)
	}
	if err != nil {
		n := len(joined(err))
		if len(vanished) > 0 {
			return notes, len(vanished), fmt.Errorf("revert incomplete, state kept in %s: %d of %d value(s) not restored (and %d target(s) gone, see the notes):\n%w", statePath, n, len(st.Plan.Writes), len(vanished), err)
		}
		return notes, len(vanished), fmt.Errorf("revert incomplete, state kept in %s: %d of %d value(s) not restored:\n%w", statePath, n, len(st.Plan.Writes), err)
	}
	if err := os.Rename(statePath, statePath+".reverted"); err != nil {
		return notes, len(vanished), err
	}
	if len(vanished) > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d target(s) no longer exist and were not restored; everything else was, and the state file is moved aside", len(vanished), len(st.Plan.Writes)))
	}
	return notes, len(vanished), nil
}

// rootName is root as a message names it.
func rootName(root string) string {
	if IsLive(root) {
		return "/ (the live host)"
	}
	return root
}

// joined returns the errors an errors.Join holds, or err alone.
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

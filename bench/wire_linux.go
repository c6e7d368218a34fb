package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spindlenet/spindle/tune"
)

// Wire is the "wire" topology: two network namespaces joined by a veth
// pair with GRO on and TSO off on both ends, so that the receive path goes
// through real NAPI instances and TCP sockets get NAPI ids (busy polling is
// real). The server listens in one namespace, the client dials from the
// other. It needs root, ip(8) and ethtool(8).
type Wire struct {
	// ServerNS and ClientNS are the namespace names (under /var/run/netns).
	ServerNS, ClientNS string
	// ServerIf and ClientIf are the veth ends in each namespace.
	ServerIf, ClientIf string
	// ServerIP and ClientIP are the addresses (a /30).
	ServerIP, ClientIP string
}

// WireNames returns the namespace and interface names NewWire uses for tag.
func WireNames(tag string) Wire {
	return Wire{
		ServerNS: "spd-bench-" + tag + "-s", ClientNS: "spd-bench-" + tag + "-c",
		// Interface names are limited to 15 bytes.
		ServerIf: trunc("spbs"+tag, 15), ClientIf: trunc("spbc"+tag, 15),
		ServerIP: "10.213.0.1", ClientIP: "10.213.0.2",
	}
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func runCmd(argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// WireRequirements reports why the wire topology cannot be built here, or
// nil if it can.
func WireRequirements() error {
	if os.Geteuid() != 0 {
		return errors.New("the wire topology needs root (network namespaces)")
	}
	for _, tool := range []string{"ip", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the wire topology needs %s(8): %w", tool, err)
		}
	}
	return nil
}

// NewWire creates the namespaces and the veth pair. On error it removes
// whatever it created.
func NewWire(tag string) (*Wire, error) {
	if err := WireRequirements(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	w := WireNames(tag)
	ok := false
	defer func() {
		if !ok {
			w.Close()
		}
	}()
	steps := [][]string{
		{"ip", "netns", "add", w.ServerNS},
		{"ip", "netns", "add", w.ClientNS},
		{"ip", "link", "add", w.ServerIf, "type", "veth", "peer", "name", w.ClientIf},
		{"ip", "link", "set", w.ServerIf, "netns", w.ServerNS},
		{"ip", "link", "set", w.ClientIf, "netns", w.ClientNS},
		{"ip", "-n", w.ServerNS, "addr", "add", w.ServerIP + "/30", "dev", w.ServerIf},
		{"ip", "-n", w.ClientNS, "addr", "add", w.ClientIP + "/30", "dev", w.ClientIf},
		{"ip", "netns", "exec", w.ServerNS, "ethtool", "-K", w.ServerIf, "gro", "on", "tso", "off"},
		{"ip", "netns", "exec", w.ClientNS, "ethtool", "-K", w.ClientIf, "gro", "on", "tso", "off"},
		{"ip", "-n", w.ServerNS, "link", "set", "lo", "up"},
		{"ip", "-n", w.ClientNS, "link", "set", "lo", "up"},
		{"ip", "-n", w.ServerNS, "link", "set", w.ServerIf, "up"},
		{"ip", "-n", w.ClientNS, "link", "set", w.ClientIf, "up"},
	}
	for _, s := range steps {
		if err := runCmd(s...); err != nil {
			return nil, fmt.Errorf("bench: wire topology: %w", err)
		}
	}
	ok = true
	return &w, nil
}

// Name implements Topology. Any goroutine.
func (w *Wire) Name() string { return "wire" }

// ServerPrefix implements Topology. Any goroutine.
func (w *Wire) ServerPrefix() []string { return []string{"ip", "netns", "exec", w.ServerNS} }

// ListenAddr implements Topology. Any goroutine.
func (w *Wire) ListenAddr() string { return w.ServerIP + ":0" }

// ClientNetNS implements Topology. Any goroutine.
func (w *Wire) ClientNetNS() string { return filepath.Join("/var/run/netns", w.ClientNS) }

// Close deletes both namespaces, which destroys the veth pair with them.
// It is idempotent. Any goroutine.
func (w *Wire) Close() error {
	var errs []error
	for _, ns := range []string{w.ServerNS, w.ClientNS} {
		if _, err := os.Stat(filepath.Join("/var/run/netns", ns)); err != nil {
			continue
		}
		if err := runCmd("ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	// A veth created before its move into a namespace still lives in ours.
	if _, err := os.Stat(filepath.Join("/sys/class/net", w.ServerIf)); err == nil {
		if err := runCmd("ip", "link", "del", w.ServerIf); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RPSMask formats cpus as a kernel CPU bitmap (rps_cpus, smp_affinity):
// 32-bit hex words, most significant first, separated by commas. No CPU
// gives "0".
func RPSMask(cpus []int) string {
	var words []uint32
	for _, c := range cpus {
		for c/32 >= len(words) {
			words = append(words, 0)
		}
		words[c/32] |= 1 << (c % 32)
	}
	if len(words) == 0 {
		return "0"
	}
	parts := []string{fmt.Sprintf("%x", words[len(words)-1])}
	for i := len(words) - 2; i >= 0; i-- {
		parts = append(parts, fmt.Sprintf("%08x", words[i]))
	}
	return strings.Join(parts, ",")
}

// sameMask compares two CPU bitmaps as the kernel prints them (padded
// with zeros to the number of possible CPUs) and as RPSMask writes them.
func sameMask(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimLeft(strings.ReplaceAll(strings.TrimSpace(s), ",", ""), "0")
		if s == "" {
			return "0"
		}
		return s
	}
	return norm(a) == norm(b)
}

// serverQueues runs fn with the sysfs directory of every receive queue of
// the server's veth end, seen from inside the server namespace (through a
// sysfs mounted there for the call and unmounted after it).
func (w *Wire) serverQueues(fn func(queue string) error) error {
	return tune.InNetNS(filepath.Join("/var/run/netns", w.ServerNS), func() error {
		dir, err := os.MkdirTemp("", "spindle-rps-")
		if err != nil {
			return err
		}
		unmount, err := tune.MountNetNSView(dir)
		if err != nil {
			os.RemoveAll(dir)
			return err
		}
		queues, err := filepath.Glob(filepath.Join(dir, "sys", "class", "net", w.ServerIf, "queues", "rx-*"))
		if err == nil && len(queues) == 0 {
			err = fmt.Errorf("no receive queues of %s in %s", w.ServerIf, w.ServerNS)
		}
		for _, q := range queues {
			if err != nil {
				break
			}
			err = fn(q)
		}
		if uerr := unmount(); uerr != nil {
			// Do not remove a directory that may still hold a sysfs mount.
			return errors.Join(err, uerr)
		}
		return errors.Join(err, os.RemoveAll(dir))
	})
}

// SetServerRPS writes the rps_cpus mask of every receive queue of the
// server's veth end to cpus (none: 0, RPS off) and its rps_flow_cnt to 0
// (no RFS, which would steer each flow to the CPU of the thread reading
// it), inside the server namespace, and reads both back. On a veth the
// receiving side's NAPI poll runs on the sending CPU; RPS then moves the
// protocol processing of the server's incoming packets to a CPU of the
// mask. The values disappear with the namespace. Any goroutine, one call
// at a time.
func (w *Wire) SetServerRPS(cpus []int) error {
	mask := RPSMask(cpus)
	err := w.serverQueues(func(q string) error {
		for _, kv := range [][2]string{{"rps_flow_cnt", "0"}, {"rps_cpus", mask}} {
			path := filepath.Join(q, kv[0])
			if err := os.WriteFile(path, []byte(kv[1]+"\n"), 0); err != nil {
				return err
			}
			got, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if !sameMask(string(got), kv[1]) {
				return fmt.Errorf("%s reads back %q after writing %q", kv[0], strings.TrimSpace(string(got)), kv[1])
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("bench: set RPS of %s in %s: %w", w.ServerIf, w.ServerNS, err)
	}
	return nil
}

// ServerRPS reads the rps_cpus mask and rps_flow_cnt of each receive queue
// of the server's veth end, keyed by queue name ("rx-0"). Any goroutine.
func (w *Wire) ServerRPS() (map[string][2]string, error) {
	out := map[string][2]string{}
	err := w.serverQueues(func(q string) error {
		var v [2]string
		for i, name := range []string{"rps_cpus", "rps_flow_cnt"} {
			b, err := os.ReadFile(filepath.Join(q, name))
			if err != nil {
				return err
			}
			v[i] = strings.TrimSpace(string(b))
		}
		out[filepath.Base(q)] = v
		return nil
	})
	return out, err
}

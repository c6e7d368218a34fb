package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spindlenet/spindle/internal/veth"
	"github.com/spindlenet/spindle/topo"
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

// WireNames returns the namespace and interface names NewWire uses for tag
// in this process.
func WireNames(tag string) Wire {
	return wireFromPair(veth.Names(veth.Config{Tag: "bench-" + tag}))
}

func wireFromPair(p veth.Pair) Wire {
	return Wire{
		ServerNS: p.NSA, ClientNS: p.NSB,
		ServerIf: p.DevA, ClientIf: p.DevB,
		ServerIP: p.IPA(), ClientIP: p.IPB(),
	}
}

// WireRequirements reports why the wire topology cannot be built here, or
// nil if it can.
func WireRequirements() error {
	err := veth.Requirements()
	var te *veth.ToolError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return fmt.Errorf("the wire topology needs %s(8): %w", te.Tool, te.Err)
	case errors.Is(err, veth.ErrNotRoot):
		return errors.New("the wire topology needs root: it makes two network namespaces joined by a veth pair (CAP_SYS_ADMIN, CAP_NET_ADMIN)")
	}
	return err
}

// NewWire creates the namespaces and the veth pair. On error it removes
// whatever it created.
func NewWire(tag string) (*Wire, error) {
	if err := WireRequirements(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	p, err := veth.New(veth.Config{Tag: "bench-" + tag})
	if err != nil {
		return nil, fmt.Errorf("bench: wire topology: %w", err)
	}
	w := wireFromPair(*p)
	return &w, nil
}

// Name implements Topology. Any goroutine.
func (w *Wire) Name() string { return "wire" }

// ServerSysctl returns the dotted sysctl name as the server's namespace
// has it (read from a thread inside it: /proc/sys/net is the reading
// thread's namespace's): a namespace made with ip netns add starts with
// the initial namespace's per-namespace sysctls, not those of the
// namespace the harness runs in. Any goroutine.
func (w *Wire) ServerSysctl(name string) (v string, err error) {
	err = veth.InNetNS(veth.Path(w.ServerNS), func() error {
		b, err := os.ReadFile(topo.SysctlPath(name))
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

// ServerPrefix implements Topology. Any goroutine.
func (w *Wire) ServerPrefix() []string { return []string{"ip", "netns", "exec", w.ServerNS} }

// ListenAddr implements Topology. Any goroutine.
func (w *Wire) ListenAddr() string { return w.ServerIP + ":0" }

// ClientNetNS implements Topology. Any goroutine.
func (w *Wire) ClientNetNS() string { return veth.Path(w.ClientNS) }

// Close deletes both namespaces, which destroys the veth pair with them.
// It is idempotent. Any goroutine.
func (w *Wire) Close() error {
	p := veth.Pair{NSA: w.ServerNS, NSB: w.ClientNS, DevA: w.ServerIf, DevB: w.ClientIf}
	return p.Close()
}

// RPSMask formats cpus as a kernel CPU bitmap (rps_cpus, smp_affinity):
// 32-bit hex words, most significant first, separated by commas. No CPU
// gives "0".
func RPSMask(cpus []int) string { return topo.NewCPUSet(cpus...).Mask() }

// sameMask compares two CPU bitmaps as the kernel prints them (padded
// with zeros to the number of possible CPUs) and as RPSMask writes them.
func sameMask(a, b string) bool {
	x, errA := topo.ParseCPUMask(a)
	y, errB := topo.ParseCPUMask(b)
	return errA == nil && errB == nil && x.Equal(y)
}

// serverQueues runs fn with the sysfs directory of every receive queue of
// the server's veth end, seen from inside the server namespace (through a
// sysfs mounted there for the call and unmounted after it).
func (w *Wire) serverQueues(fn func(queue string) error) error {
	return veth.InNetNS(veth.Path(w.ServerNS), func() error {
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
			// Do not remove a directory that may still hold a mount (sysfs, or the bind of /proc).
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

package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

package bench

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWireTopology builds the wire topology, checks GRO on and TSO off on
// both veth ends, drives verified load from the client namespace at a
// server child in the server namespace, and checks that Close leaves
// nothing behind.
func TestWireTopology(t *testing.T) {
	if err := WireRequirements(); err != nil {
		t.Skip(err)
	}
	tag := "t" + strconv.Itoa(os.Getpid())
	w, err := NewWire(tag)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			w.Close()
		}
	})
	for _, end := range []struct{ ns, dev string }{{w.ServerNS, w.ServerIf}, {w.ClientNS, w.ClientIf}} {
		out, err := exec.Command("ip", "netns", "exec", end.ns, "ethtool", "-k", end.dev).CombinedOutput()
		if err != nil {
			t.Fatalf("ethtool -k %s: %v: %s", end.dev, err, out)
		}
		feats := string(out)
		if !strings.Contains(feats, "generic-receive-offload: on") || !strings.Contains(feats, "tcp-segmentation-offload: off") {
			t.Errorf("%s in %s: want GRO on and TSO off:\n%s", end.dev, end.ns, feats)
		}
	}

	argv, env := testChildCommand()
	argv = append(w.ServerPrefix(), append(argv, "-arm", "go-net", "-listen", w.ListenAddr(), "-control")...)
	p, err := startServerProc(context.Background(), argv, env)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.hello.Addr, w.ServerIP+":") {
		t.Errorf("server listens on %s, want %s", p.hello.Addr, w.ServerIP)
	}
	res, err := RunLoad(context.Background(), LoadConfig{
		Addr: p.hello.Addr, NetNS: w.ClientNetNS(), Conns: 4, Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond,
	})
	// The harness's own namespace cannot reach the server's address: the
	// client really dialled from the client namespace.
	if c, err := net.DialTimeout("tcp", p.hello.Addr, 300*time.Millisecond); err == nil {
		c.Close()
		t.Error("the server namespace's address is reachable from the host namespace")
	}
	if serr := p.stop(); serr != nil {
		t.Error(serr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Replies == 0 {
		t.Fatal("no verified replies over the veth pair")
	}
	t.Logf("wire: %.0f req/s, %s", res.Throughput(), res.Hist)

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	for _, ns := range []string{w.ServerNS, w.ClientNS} {
		if _, err := os.Stat(filepath.Join("/var/run/netns", ns)); err == nil {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	for _, dev := range []string{w.ServerIf, w.ClientIf} {
		if _, err := os.Stat(filepath.Join("/sys/class/net", dev)); err == nil {
			t.Errorf("interface %s left behind", dev)
		}
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestWakeupWire runs every wake-up mode over the veth pair, where sockets
// have NAPI ids and busy polling is real.
func TestWakeupWire(t *testing.T) {
	if err := WireRequirements(); err != nil {
		t.Skip(err)
	}
	rep, err := Wakeup(context.Background(), WakeupConfig{Samples: 5, Interval: 5 * time.Millisecond, Topology: "wire", Tag: "w" + strconv.Itoa(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Skipped != "" || r.Samples != 5 {
			t.Errorf("%s: %+v", r.Mode, r)
		}
	}
	if rep.Topology != "wire" {
		t.Errorf("topology %q", rep.Topology)
	}
	w := WireNames("w" + strconv.Itoa(os.Getpid()))
	if _, err := os.Stat(filepath.Join("/var/run/netns", w.ServerNS)); err == nil {
		t.Errorf("namespace %s left behind", w.ServerNS)
	}
}

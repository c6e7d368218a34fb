package bench

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/veth"
	"github.com/spindlenet/spindle/topo"
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
	res, err := loadAnswered(LoadConfig{
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
	if res.Answered == 0 {
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

func TestRPSMask(t *testing.T) {
	for _, tc := range []struct {
		cpus []int
		want string
	}{
		{nil, "0"},
		{[]int{0}, "1"},
		{[]int{1}, "2"},
		{[]int{0, 1, 3}, "b"},
		{[]int{31}, "80000000"},
		{[]int{32}, "1,00000000"},
		{[]int{1, 40, 70}, "40,00000100,00000002"},
	} {
		if got := RPSMask(tc.cpus); got != tc.want {
			t.Errorf("RPSMask(%v) = %q, want %q", tc.cpus, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"1\n", "1", true},
		{"00000000,00000002", "2", true},
		{"0\n", "0", true},
		{"00", "0", true},
		{"1", "2", false},
		{"1,00000000", "1", false},
	} {
		if got := sameMask(tc.a, tc.b); got != tc.same {
			t.Errorf("sameMask(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

// softnetReceivedRPS returns /proc/net/softnet_stat's received_rps column
// (RPS IPIs the CPU handled) for cpu.
func softnetReceivedRPS(t *testing.T, cpu int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		t.Fatal(err)
	}
	sn, err := topo.ParseSoftnet(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sn {
		if s.CPU == cpu {
			return s.ReceivedRPS
		}
	}
	t.Fatalf("CPU %d not in softnet_stat", cpu)
	return 0
}

// TestWireServerRPS sets the server veth's RPS mask inside the server
// namespace, reads it back through a second mount, checks that the host's
// view is untouched, and proves the mask is live: with the client sending
// from CPU 1 and RPS pointing at CPU 0, CPU 0 handles RPS IPIs.
func TestWireServerRPS(t *testing.T) {
	if err := WireRequirements(); err != nil {
		t.Skip(err)
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs to steer between")
	}
	w, err := NewWire("r" + strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	for _, tc := range []struct {
		cpus []int
		want string
	}{{[]int{1}, "2"}, {nil, "0"}, {[]int{0, 1}, "3"}, {[]int{0}, "1"}} {
		if err := w.SetServerRPS(tc.cpus); err != nil {
			t.Fatal(err)
		}
		got, err := w.ServerRPS()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatal("no receive queues read")
		}
		for q, v := range got {
			if !sameMask(v[0], tc.want) || v[1] != "0" {
				t.Errorf("CPUs %v: %s rps_cpus %q rps_flow_cnt %q, want %q and 0", tc.cpus, q, v[0], v[1], tc.want)
			}
		}
	}
	if err := w.SetServerRPS([]int{4096}); err == nil {
		t.Error("a mask beyond the machine's CPUs was accepted")
	}
	if err := w.SetServerRPS([]int{0}); err != nil {
		t.Fatal(err)
	}

	argv, env := testChildCommand()
	argv = append(w.ServerPrefix(), append(argv, "-arm", "go-net", "-listen", w.ListenAddr(), "-cpus", "0", "-control")...)
	p, err := startServerProc(context.Background(), argv, env)
	if err != nil {
		t.Fatal(err)
	}
	before := softnetReceivedRPS(t, 0)
	res, err := loadAnswered(LoadConfig{
		Addr: p.hello.Addr, NetNS: w.ClientNetNS(), Conns: 4, CPUs: []int{1}, Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond,
	})
	after := softnetReceivedRPS(t, 0)
	if serr := p.stop(); serr != nil {
		t.Error(serr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Answered == 0 {
		t.Fatal("no verified replies")
	}
	if after <= before {
		t.Errorf("RPS to CPU 0 with the client on CPU 1: CPU 0 handled no RPS IPIs during %d replies", res.Answered)
	}
	t.Logf("%d replies, %d RPS IPIs on CPU 0", res.Answered, after-before)
}

// TestRunServerRPS runs one arm under two RPS settings on the wire and
// checks that the results alternate, are named and recorded by setting.
func TestRunServerRPS(t *testing.T) {
	if err := WireRequirements(); err != nil {
		t.Skip(err)
	}
	argv, env := testChildCommand()
	rep, err := Run(context.Background(), Config{
		Arms: []string{"go-net"}, Topology: "wire", Tag: "q" + strconv.Itoa(os.Getpid()), Duration: 600 * time.Millisecond, Reps: 1, Conns: 2,
		OpenFractions: []float64{}, ServerCommand: argv, ServerEnv: env, ServerRPS: []string{"0", "none"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Config.ServerRPS, []string{"0", "none"}) {
		t.Errorf("config server_rps %v", rep.Config.ServerRPS)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Arm+"|"+r.ServerRPS)
	}
	if want := []string{"go-net rps=0|0", "go-net rps=none|none"}; !slices.Equal(got, want) {
		t.Errorf("results %v, want %v", got, want)
	}
	if len(rep.Summary) != 2 {
		t.Errorf("%d summary rows, want one per setting", len(rep.Summary))
	}
}

// loadAnswered runs RunLoad with cfg, waiting up to 10 s for the window's
// replies, and again with the window twice as long (up to 3.2 s) while no
// request of it was answered: CI beside other work got no reply in a
// 200 ms window once. Unlike servedLoad it returns the run's error, so
// that the caller stops its server child first.
func loadAnswered(cfg LoadConfig) (*LoadResult, error) {
	cfg.Drain = 10 * time.Second
	for {
		res, err := RunLoad(context.Background(), cfg)
		if err != nil || res.Answered > 0 || cfg.Duration >= 3200*time.Millisecond {
			return res, err
		}
		cfg.Duration *= 2
	}
}

// TestWireServerSysctl: the wire topology reads a sysctl as its server's
// namespace has it, which the report's TCP congestion control comes from
// (a namespace made with ip netns add starts with the initial namespace's,
// not the harness's). The server namespace is set to another congestion
// control than the harness's; ServerSysctl must say that one.
func TestWireServerSysctl(t *testing.T) {
	if err := WireRequirements(); err != nil {
		t.Skip(err)
	}
	avail, err := os.ReadFile(topo.SysctlPath("net.ipv4.tcp_available_congestion_control"))
	if err != nil {
		t.Skipf("no IPv4 TCP sysctls here: %v", err)
	}
	own := hostInfo().TCPCongestion
	other := ""
	for _, cc := range strings.Fields(string(avail)) {
		if cc != own {
			other = cc
			break
		}
	}
	if other == "" {
		t.Skipf("one TCP congestion control available (%s): none other to set", own)
	}
	w, err := NewWire("s" + strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := veth.InNetNS(veth.Path(w.ServerNS), func() error {
		return os.WriteFile(topo.SysctlPath("net.ipv4.tcp_congestion_control"), []byte(other), 0)
	}); err != nil {
		t.Fatalf("setting %s in the server namespace: %v", other, err)
	}
	got, err := w.ServerSysctl("net.ipv4.tcp_congestion_control")
	if err != nil || got != other {
		t.Errorf("ServerSysctl: %q, %v; want %q (the harness's namespace has %q)", got, err, other, own)
	}
}

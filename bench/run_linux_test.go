package bench

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// restrictedEnv makes the test binary run TestConfigCPUsUnderAffinity's
// child part.
const restrictedEnv = "SPINDLE_BENCH_TEST_RESTRICTED"

// TestConfigCPUsUnderAffinity: under taskset or a cpuset (a container's
// CPUs 2-3, say) Config's default CPUs are CPUs the process may run on,
// and a CPU given is accepted when it is online. runtime.NumCPU counts the
// affinity mask, and Config took it for CPU numbers: the defaults were CPUs
// 0 and 1, outside the mask, and a process allowed only its last CPU
// refused that CPU as one that "does not exist"; Host.CPUs, documented as
// the online CPUs, was the mask's count.
func TestConfigCPUsUnderAffinity(t *testing.T) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Skipf("no online CPU list: %v", err)
	}
	online, err := ParseCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(restrictedEnv) != "" {
		last := online[len(online)-1]
		if runtime.NumCPU() != 1 {
			t.Fatalf("child: NumCPU %d, want 1 (the affinity was not inherited)", runtime.NumCPU())
		}
		if _, err := (Config{ServerCPUs: []int{last}, ClientCPUs: []int{last}}).withDefaults(); err != nil {
			t.Errorf("a process allowed CPU %d only: %v", last, err)
		}
		if h := hostInfo(); h.CPUs != len(online) {
			t.Errorf("host CPUs %d, want the %d online", h.CPUs, len(online))
		}
		return
	}
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 || allowed[len(allowed)-1] != online[len(online)-1] {
		t.Skipf("needs two CPUs this process may run on, the last online one among them; has %v of %v", allowed, online)
	}
	last := allowed[len(allowed)-1]
	var (
		cfg              Config
		cfgErr, childErr error
		out              []byte
	)
	onCPU(t, last, func() {
		cfg, cfgErr = Config{}.withDefaults()
		// The child inherits this thread's affinity: NumCPU 1 there.
		cmd := exec.Command(os.Args[0], "-test.run=^TestConfigCPUsUnderAffinity$", "-test.count=1")
		cmd.Env = append(os.Environ(), restrictedEnv+"=1", noRaceExitSleep())
		out, childErr = cmd.CombinedOutput()
	})
	if cfgErr != nil {
		t.Fatal(cfgErr)
	}
	if !slices.Equal(cfg.ServerCPUs, []int{last}) || !slices.Equal(cfg.ClientCPUs, []int{last}) {
		t.Errorf("allowed CPU %d only: default server CPUs %v, client CPUs %v; want [%d] for both", last, cfg.ServerCPUs, cfg.ClientCPUs, last)
	}
	if childErr != nil {
		t.Errorf("child allowed CPU %d only: %v\n%s", last, childErr, out)
	}
}

// TestHostTCPCongestion: the report's host names the congestion control the
// arms' sockets get, as the kernel lists it among those available.
func TestHostTCPCongestion(t *testing.T) {
	avail, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		t.Skipf("no IPv4 TCP sysctls here: %v", err)
	}
	cc := hostInfo().TCPCongestion
	if cc == "" || !slices.Contains(strings.Fields(string(avail)), cc) {
		t.Errorf("host's TCP congestion control %q, want one of the available %q", cc, strings.TrimSpace(string(avail)))
	}
}

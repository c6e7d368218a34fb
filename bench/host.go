package bench

import (
	"bufio"
	"os"
	"runtime"
	"strings"

	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/topo"
)

func hostInfo() Host {
	h := Host{CPUs: len(onlineCPUs()), GoVersion: runtime.Version(), Kernel: kver.Release()}
	h.Hostname, _ = os.Hostname()
	h.TCPCongestion = sysctlText("net.ipv4.tcp_congestion_control")
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return h
}

// sysctlText is the trimmed value of the dotted sysctl name, "" if it
// cannot be read.
func sysctlText(name string) string {
	b, err := os.ReadFile(topo.SysctlPath(name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

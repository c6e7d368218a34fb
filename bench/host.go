package bench

import (
	"bufio"
	"os"
	"runtime"
	"strings"

	"github.com/spindlenet/spindle/internal/kver"
)

func hostInfo() Host {
	h := Host{CPUs: len(onlineCPUs()), GoVersion: runtime.Version(), Kernel: kver.Release()}
	h.Hostname, _ = os.Hostname()
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

package proctask

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// IOWorkers returns the ids of thread tid's io-wq workers, the threads of
// this process named iou-wrk-<tid>. Reading /proc/self/task while threads
// exit can skip some: poll for a state rather than trust one reading.
func IOWorkers(tid int) []int {
	tasks, _ := filepath.Glob("/proc/self/task/*")
	want := "iou-wrk-" + strconv.Itoa(tid)
	var out []int
	for _, task := range tasks {
		comm, err := os.ReadFile(filepath.Join(task, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != want {
			continue
		}
		if id, err := strconv.Atoi(filepath.Base(task)); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// CPUsAllowed returns the Cpus_allowed_list of thread tid of this process,
// as the kernel writes it ("1", "0-3", "0,2").
func CPUsAllowed(tid int) (string, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no Cpus_allowed_list in /proc/self/task/%d/status", tid)
}

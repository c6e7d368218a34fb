package bench

import (
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// orphanChildEnv makes the test binary start `sleep` with startPinned,
// print its pid and wait to be killed (TestStartPinnedDiesWithHarness).
const orphanChildEnv = "SPINDLE_BENCH_TEST_ORPHAN"

// orphanMain is the harness TestStartPinnedDiesWithHarness kills: it
// starts a program as the proxy arms start haproxy and nginx, has some
// locked threads exit meanwhile (as the load generator's do), says the
// program's pid and waits.
func orphanMain() int {
	cpus, err := allowedCPUs()
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	cmd := exec.Command("sleep", "300")
	if err := startPinned(cmd, cpus[:1]); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { runtime.LockOSThread() }) // the thread exits with it
	}
	wg.Wait()
	fmt.Println(cmd.Process.Pid)
	time.Sleep(time.Minute)
	return 0
}

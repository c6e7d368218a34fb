package engine

import (
	"runtime"
	"testing"
)

// steeredHandler echoes and sends on served the CPU of the loop that
// serves each read.
func steeredHandler() (*BaseHandlerFunc, chan int) {
	served := make(chan int, 16)
	return &BaseHandlerFunc{data: func(c *Conn, buf Buffer) bool {
		served <- c.Loop().CPU()
		c.Write(buf.Bytes())
		return false
	}}, served
}

// checkSteered dials addr from CPUs 0, 1, 1 and 0 in turn and checks that
// each connection is served (served, of steeredHandler) by the loop on
// the CPU its SYN was processed on.
func checkSteered(t *testing.T, addr string, served chan int) {
	t.Helper()
	for _, cpu := range []int{0, 1, 1, 0} {
		if err := dialFromCPU(cpu, addr); err != nil {
			t.Fatal(err)
		}
		if got := <-served; got != cpu {
			t.Errorf("a connection from CPU %d was served by the loop on CPU %d", cpu, got)
		}
	}
}

// upgradeGroup starts an engine on loops 0 and 1 listening (with the
// classic-BPF program when program) and a second one, as the new process
// of a zero-downtime upgrade, listening on its address with lc, whose
// SO_REUSEPORT group it joins; the first's listener then closes, its
// sockets leaving the group in loop order. It returns the address and the
// second engine's served (steeredHandler).
func upgradeGroup(t *testing.T, program bool, lc *ListenConfig) (string, chan int) {
	if runtime.NumCPU() < 2 {
		t.Skip("two loops need 2 CPUs")
	}
	h, served := steeredHandler()
	cfg := testConfig(BackendEpoll)
	cfg.CPUs = []int{0, 1}
	old := newEngine(t, cfg, &echoHandler{})
	was := incomingCPUSteering
	incomingCPUSteering = was && !program
	oldLn, err := old.Listen("tcp", "127.0.0.1:0", nil)
	incomingCPUSteering = was
	if err != nil {
		t.Fatal(err)
	}
	addr := oldLn.Addr().String()
	e := newEngine(t, cfg, h)
	ln, err := e.Listen("tcp", addr, lc)
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, old)
	runEngine(t, e)
	t.Cleanup(func() { ln.Close() }) // first: the listener closes before the engines stop
	oldLn.Close()
	return addr, served
}

// steerAfterUpgrade runs upgradeGroup: the second engine's connections
// must still be served on the CPU that processed their SYN.
func steerAfterUpgrade(t *testing.T, program bool) {
	addr, served := upgradeGroup(t, program, nil)
	checkSteered(t, addr, served)
}

// TestSteeringAfterOtherGroupLeaves: steerAfterUpgrade, both engines
// steering as this kernel has them do. With the classic-BPF program the
// new sockets joined the group after the old ones, and when those left the
// kernel moved the last socket into each place freed: the program's places
// were reversed for good.
func TestSteeringAfterOtherGroupLeaves(t *testing.T) { steerAfterUpgrade(t, false) }

// TestSteeringAfterProgramGroupLeaves: steerAfterUpgrade, the running
// engine (an older build's) having attached the classic-BPF program to the
// group: the new one's Listen detaches it, or it went on picking sockets by
// their places in the group.
func TestSteeringAfterProgramGroupLeaves(t *testing.T) {
	if !incomingCPUSteering {
		t.Skip("before 6.2 the program is the steering")
	}
	steerAfterUpgrade(t, true)
}

// TestSteeringBefore62 runs TestSteering's check with the classic-BPF
// program that kernels before 6.2 steer with.
func TestSteeringBefore62(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("steering needs 2 CPUs")
	}
	defer func(v bool) { incomingCPUSteering = v }(incomingCPUSteering)
	incomingCPUSteering = false
	h, served := steeredHandler()
	cfg := testConfig(BackendURing)
	cfg.CPUs = []int{0, 1}
	_, addr := startEngine(t, cfg, h)
	checkSteered(t, addr, served)
}

// TestSQPollCPUSameNode: SQPollAuto puts the SQPOLL thread on an allowed
// CPU outside the loops' on the loops' NUMA node (DESIGN.md), not on the
// first one outside, which may be on another node.
func TestSQPollCPUSameNode(t *testing.T) {
	defer func(f func(int) int) { nodeOfCPU = f }(nodeOfCPU)
	nodes := map[int]int{0: 0, 1: 0, 2: 1, 3: 1}
	nodeOfCPU = func(cpu int) int { return nodes[cpu] }
	for _, tc := range []struct {
		loops []int
		want  int
	}{
		{[]int{2}, 3},
		{[]int{3}, 2},
		{[]int{0}, 1},
		{[]int{2, 3}, 0}, // none left on node 1: the first outside
	} {
		e := &Engine{allowed: []int{0, 1, 2, 3}, cfg: Config{CPUs: tc.loops, Logf: t.Logf}}
		if got := sqpollCPU(e); got != tc.want {
			t.Errorf("loops on %v: SQPOLL thread on CPU %d, want %d", tc.loops, got, tc.want)
		}
	}
}

// TestNoSteeringSpreadsAfterProgramGroupLeaves: a NoSteering listener
// joins the group of a running engine (an older build's, on a kernel
// before 6.2) that attached the classic-BPF program; once that engine's
// sockets leave, connections are spread by the 4-tuple hash, as
// NoSteering promises. The program stayed attached to the group: it went
// on choosing a socket by the receiving CPU, and every connection whose
// SYN was processed on one CPU went to one loop.
func TestNoSteeringSpreadsAfterProgramGroupLeaves(t *testing.T) {
	addr, served := upgradeGroup(t, true, &ListenConfig{NoSteering: true})
	// All from CPU 0: by the hash, 24 connections all go to one of two
	// loops once in 2^23 runs.
	loops := map[int]int{}
	for range 24 {
		if err := dialFromCPU(0, addr); err != nil {
			t.Fatal(err)
		}
		loops[<-served]++
	}
	if len(loops) < 2 {
		t.Errorf("24 connections from CPU 0 were served by loops on CPUs %v: not spread by the hash", loops)
	}
}

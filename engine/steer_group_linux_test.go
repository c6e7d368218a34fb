package engine

import (
	"runtime"
	"testing"
)

// TestSteeringAfterOtherGroupLeaves: a second engine (as a new process of
// a zero-downtime upgrade) listens on the address of a running one, whose
// SO_REUSEPORT sockets it joins; the first then stops. The second's
// connections must still be served on the CPU that processed their SYN.
func TestSteeringAfterOtherGroupLeaves(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("steering needs 2 CPUs")
	}
	served := make(chan int, 16)
	h := &BaseHandlerFunc{data: func(c *Conn, buf Buffer) bool {
		served <- c.Loop().CPU()
		c.Write(buf.Bytes())
		return false
	}}
	cfg := testConfig(BackendEpoll)
	cfg.CPUs = []int{0, 1}
	old := newEngine(t, cfg, &echoHandler{})
	oldLn, err := old.Listen("tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := oldLn.Addr().String()
	e := newEngine(t, cfg, h)
	ln, err := e.Listen("tcp", addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	runEngine(t, old)
	runEngine(t, e)
	oldLn.Close() // its sockets leave the group now, in loop order
	for _, cpu := range []int{0, 1, 1, 0} {
		if err := dialFromCPU(cpu, addr); err != nil {
			t.Fatal(err)
		}
		if got := <-served; got != cpu {
			t.Errorf("a connection from CPU %d was served by the loop on CPU %d", cpu, got)
		}
	}
}

// TestSteeringAfterProgramGroupLeaves: as TestSteeringAfterOtherGroupLeaves,
// the running engine (an older build's, or a kernel before 6.2's) having
// attached the classic-BPF program to the group: the new one's Listen
// detaches it, or it went on picking sockets by their places in the group,
// which the old sockets' leaving reverses.
func TestSteeringAfterProgramGroupLeaves(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("steering needs 2 CPUs")
	}
	if !incomingCPUSteering {
		t.Skip("before 6.2 the program is the steering")
	}
	served := make(chan int, 16)
	h := &BaseHandlerFunc{data: func(c *Conn, buf Buffer) bool {
		served <- c.Loop().CPU()
		c.Write(buf.Bytes())
		return false
	}}
	cfg := testConfig(BackendEpoll)
	cfg.CPUs = []int{0, 1}
	old := newEngine(t, cfg, &echoHandler{})
	incomingCPUSteering = false
	oldLn, err := old.Listen("tcp", "127.0.0.1:0", nil)
	incomingCPUSteering = true
	if err != nil {
		t.Fatal(err)
	}
	addr := oldLn.Addr().String()
	e := newEngine(t, cfg, h)
	ln, err := e.Listen("tcp", addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	runEngine(t, old)
	runEngine(t, e)
	oldLn.Close()
	for _, cpu := range []int{0, 1, 1, 0} {
		if err := dialFromCPU(cpu, addr); err != nil {
			t.Fatal(err)
		}
		if got := <-served; got != cpu {
			t.Errorf("a connection from CPU %d was served by the loop on CPU %d", cpu, got)
		}
	}
}

// TestSteeringBefore62 runs TestSteering's check with the classic-BPF
// program that kernels before 6.2 steer with.
func TestSteeringBefore62(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("steering needs 2 CPUs")
	}
	defer func(v bool) { incomingCPUSteering = v }(incomingCPUSteering)
	incomingCPUSteering = false
	served := make(chan int, 16)
	h := &BaseHandlerFunc{data: func(c *Conn, buf Buffer) bool {
		served <- c.Loop().CPU()
		c.Write(buf.Bytes())
		return false
	}}
	cfg := testConfig(BackendURing)
	cfg.CPUs = []int{0, 1}
	_, addr := startEngine(t, cfg, h)
	for _, cpu := range []int{0, 1, 1, 0} {
		if err := dialFromCPU(cpu, addr); err != nil {
			t.Fatal(err)
		}
		if got := <-served; got != cpu {
			t.Errorf("a connection from CPU %d was served by the loop on CPU %d", cpu, got)
		}
	}
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

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/bench"
)

// TestHelperPinnedClient is not a test: it is TestHelperMain's spindle
// command (here `spindle bench client`, started by
// TestBenchClientPinsProcess) with the runtime's default GOMAXPROCS (the
// testing package sets it, and a GOMAXPROCS set is not lowered when the
// process's mask narrows). After the run it writes to stderr GOMAXPROCS
// at the start and the least it was during the run.
func TestHelperPinnedClient(t *testing.T) {
	args := os.Getenv(mainArgsEnv)
	if args == "" {
		t.Skip("helper process for TestBenchClientPinsProcess")
	}
	runtime.SetDefaultGOMAXPROCS()
	procs := runtime.GOMAXPROCS(0)
	least := procs
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			mu.Lock()
			least = min(least, runtime.GOMAXPROCS(0))
			mu.Unlock()
		}
	}()
	os.Args = append([]string{"spindle"}, strings.Split(args, "\n")...)
	main()
	close(done)
	mu.Lock()
	fmt.Fprintf(os.Stderr, "gomaxprocs %d %d\n", procs, least)
	mu.Unlock()
	os.Exit(0)
}

// TestBenchClientPinsProcess: `spindle bench client -cpus` puts every
// thread of its process on those CPUs, the Go runtime's included, not
// only its load threads: the others ran on any CPU, the server's
// included. Each thread's mask (Cpus_allowed_list) is read while the
// client's first request waits for its reply, in the test's echo server;
// GOMAXPROCS stays what it was over the run (TestHelperPinnedClient).
func TestBenchClientPinsProcess(t *testing.T) {
	list, err := cpusAllowed("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := bench.ParseCPUList(list)
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Skipf("needs two CPUs this process may run on (one for the client, one it must stay off), has %v", allowed)
	}
	client := allowed[len(allowed)-1:]
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cmd := spindleCmd("bench", "client", "-json", "-addr", ln.Addr().String(), "-conns", "1", "-cpus", bench.FormatCPUList(client),
		"-warmup", "300ms", "-duration", "1500ms")
	cmd.Args[1] = "-test.run=^TestHelperPinnedClient$"
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		ln.Close()
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	masks := make(chan map[string]string, 1)
	var once sync.Once
	served := make(chan struct{})
	go func() {
		echoFrames(ln, func() { once.Do(func() { masks <- taskMasks(pid) }) })
		close(served)
	}()
	err = cmd.Wait()
	ln.Close()
	<-served // the client's connections closed with it
	if err != nil {
		t.Fatalf("bench client: %v\n%s", err, stderr.String())
	}
	select {
	case m := <-masks:
		if len(m) == 0 {
			t.Fatal("no thread of the client read")
		}
		for tid, list := range m {
			if cpus, err := bench.ParseCPUList(list); err != nil || !slices.Equal(cpus, client) {
				t.Errorf("client thread %s may run on CPUs %s, want %v", tid, list, client)
			}
		}
	default:
		t.Fatalf("the client sent no request: %s\n%s", stdout.String(), stderr.String())
	}
	var procs, least int
	_, line, _ := strings.Cut(stderr.String(), "gomaxprocs ")
	if _, err := fmt.Sscanf(line, "%d %d", &procs, &least); err != nil {
		t.Fatalf("no GOMAXPROCS line from the client (%v): %s", err, stderr.String())
	}
	if least != procs {
		t.Errorf("the client's GOMAXPROCS fell to %d during the run, %d at its start", least, procs)
	}
}

// echoFrames answers every RPC frame on ln's connections with itself,
// calling first before each reply, until ln is closed and every
// connection it accepted has been closed by its client.
func echoFrames(ln net.Listener, first func()) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Go(func() {
			defer c.Close()
			var hdr [bench.FrameHeader]byte
			for {
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				frame := make([]byte, bench.FrameHeader+int(binary.BigEndian.Uint32(hdr[:])))
				copy(frame, hdr[:])
				if _, err := io.ReadFull(c, frame[bench.FrameHeader:]); err != nil {
					return
				}
				first()
				if _, err := c.Write(frame); err != nil {
					return
				}
			}
		})
	}
}

// taskMasks returns each thread of process pid's Cpus_allowed_list, by
// TID; a thread that exits while they are read is left out.
func taskMasks(pid int) map[string]string {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	ents, _ := os.ReadDir(dir)
	out := map[string]string{}
	for _, e := range ents {
		if list, err := cpusAllowed(filepath.Join(dir, e.Name(), "status")); err == nil {
			out[e.Name()] = list
		}
	}
	return out
}

// cpusAllowed returns the Cpus_allowed_list of a /proc status file.
func cpusAllowed(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s has no Cpus_allowed_list", path)
}

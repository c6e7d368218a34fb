package veth

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestNames(t *testing.T) {
	p := Names(Config{Tag: "a-rather-long-tag"})
	for _, dev := range []string{p.DevA, p.DevB} {
		if len(dev) > 15 {
			t.Errorf("interface name %q longer than 15 bytes", dev)
		}
	}
	if p.DevA == p.DevB || p.NSA == p.NSB {
		t.Errorf("names not distinct: %+v", p)
	}
	if p.IPA() != "10.213.0.1" || p.IPB() != "10.213.0.2" {
		t.Errorf("default addresses %s %s", p.AddrA, p.AddrB)
	}
}

// TestPair builds a pair, connects across it from one namespace to the
// other, and checks that Close leaves nothing behind.
func TestPair(t *testing.T) {
	if err := Requirements(); err != nil {
		t.Skip(err)
	}
	p, err := New(Config{Tag: "vt", AddrA: "10.213.9.1/24", AddrB: "10.213.9.2/24"})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			p.Close()
		}
	})
	var ln net.Listener
	if err := InNetNS(Path(p.NSA), func() (err error) {
		ln, err = net.Listen("tcp", p.IPA()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), 300*time.Millisecond); err == nil {
		c.Close()
		t.Error("the address in namespace A is reachable from the host namespace")
	}
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	if err := InNetNS(Path(p.NSB), func() error {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := InNetNS(Path(p.NSB)+"-missing", func() error { return nil }); err == nil {
		t.Error("InNetNS into a missing namespace succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	for _, ns := range []string{p.NSA, p.NSB} {
		if _, err := os.Stat(Path(ns)); err == nil {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	for _, dev := range []string{p.DevA, p.DevB} {
		if _, err := os.Stat(filepath.Join("/sys/class/net", dev)); err == nil {
			t.Errorf("interface %s left behind", dev)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNewEmptyTag(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "tag") {
		t.Errorf("New with empty tag: %v", err)
	}
}

// TestNewCollisionKeepsTheOtherPair: a second New with the same tag in the
// same process (two tests, one Tag) finds the namespaces taken and fails;
// it used to "remove whatever it created" by deleting the first pair's
// namespaces, which it had not created.
func TestNewCollisionKeepsTheOtherPair(t *testing.T) {
	if err := Requirements(); err != nil {
		t.Skip(err)
	}
	cfg := Config{Tag: "vdup", AddrA: "10.213.10.1/24", AddrB: "10.213.10.2/24"}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if q, err := New(cfg); err == nil {
		q.Close()
		t.Fatal("a second New with the same names succeeded")
	}
	for _, ns := range []string{p.NSA, p.NSB} {
		if _, err := os.Stat(Path(ns)); err != nil {
			t.Errorf("namespace %s of the first pair removed by the failed New: %v", ns, err)
		}
	}
	// The second New may collide on its second namespace only (the first
	// one's name is free): it must remove the one it did create.
	if err := run("ip", "netns", "del", p.NSA); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err == nil {
		t.Fatal("New succeeded with its second namespace taken")
	}
	if _, err := os.Stat(Path(p.NSA)); err == nil {
		t.Errorf("namespace %s created by the failed New left behind", p.NSA)
	}
	if _, err := os.Stat(Path(p.NSB)); err != nil {
		t.Errorf("namespace %s of the first pair removed by the failed New: %v", p.NSB, err)
	}
}

// TestInNetNSThreadDoesNotReturn: fn may change more of its thread than
// the network namespace (a private mount namespace for a sysfs mount, its
// CPU affinity); InNetNS restored only the network namespace and handed
// the thread back to the scheduler, where any goroutine could then run in
// fn's mount namespace. The thread must exit with fn's goroutine instead.
func TestInNetNSThreadDoesNotReturn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to join a network namespace (setns CAP_SYS_ADMIN)")
	}
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	if err := InNetNS("/proc/self/ns/net", func() error {
		return os.NewSyscallError("unshare", unix.Unshare(unix.CLONE_NEWNS))
	}); err != nil {
		t.Fatal(err)
	}
	// The thread exits asynchronously after fn's goroutine ends.
	var strays []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		strays = strays[:0]
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if ns, err := os.Readlink("/proc/self/task/" + task.Name() + "/ns/mnt"); err == nil && ns != self {
				strays = append(strays, task.Name()+" "+ns)
			}
		}
		if len(strays) == 0 {
			return
		}
	}
	t.Errorf("threads left in fn's mount namespace (not %s): %v", self, strays)
}

// TestInNetNSGoexit: fn that ends its goroutine with runtime.Goexit (as
// t.FailNow and t.SkipNow do, called by mistake inside fn) left InNetNS
// waiting forever for fn's result. It must return an error.
func TestInNetNSGoexit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to join a network namespace (setns CAP_SYS_ADMIN)")
	}
	done := make(chan error, 1)
	go func() {
		done <- InNetNS("/proc/self/ns/net", func() error {
			runtime.Goexit()
			return nil
		})
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("InNetNS returned no error for an fn that did not return")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("InNetNS hangs when fn calls runtime.Goexit")
	}
}

// TestCloseConcurrent: Close is idempotent and may be called from any
// goroutine, but two at once both found the namespaces, both ran ip netns
// del, and the later one reported the namespaces it found gone as an
// error.
func TestCloseConcurrent(t *testing.T) {
	if err := Requirements(); err != nil {
		t.Skip(err)
	}
	for range 5 {
		p, err := New(Config{Tag: "vcc", AddrA: "10.213.11.1/24", AddrB: "10.213.11.2/24"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { errs[i] = p.Close() })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("concurrent Close: %v", err)
			}
		}
	}
}

// TestInNetNSNotOnMainThread: fn never runs on the process's main thread,
// which the runtime parks for good instead of ending it when a locked
// goroutine returns, keeping fn's namespaces, which /proc/self and
// /proc/net then show the whole process. Found when CI's
// TestInNetNSThreadDoesNotReturn saw the main thread left in fn's mount
// namespace.
func TestInNetNSNotOnMainThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to join a network namespace (setns CAP_SYS_ADMIN)")
	}
	for i := 0; i < 500; i++ {
		var tid int
		if err := InNetNS("/proc/self/ns/net", func() error { tid = unix.Gettid(); return nil }); err != nil {
			t.Fatal(err)
		}
		if tid == os.Getpid() {
			t.Fatalf("call %d: fn ran on the main thread", i)
		}
	}
}

package uring

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/veth"
)

func TestRegisterNAPI(t *testing.T) {
	needFeatures(t, FeatNAPI, FeatNAPIStatic)
	r := newRing(t, nil)
	first := NAPIConfig{BusyPollTimeout: 50 * time.Microsecond, PreferBusyPoll: true}
	prev, err := r.RegisterNAPI(first)
	if err != nil {
		t.Fatal(err)
	}
	if prev != (NAPIConfig{}) {
		t.Errorf("first registration reported previous settings %+v", prev)
	}
	prev, err = r.RegisterNAPI(NAPIConfig{BusyPollTimeout: 20 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	if prev.BusyPollTimeout != first.BusyPollTimeout || prev.PreferBusyPoll != first.PreferBusyPoll {
		t.Errorf("previous settings %+v, want %+v", prev, first)
	}
	if err := r.UnregisterNAPI(); err != nil {
		t.Fatal(err)
	}
	// Static tracking: ids are added and removed explicitly.
	if _, err := r.RegisterNAPI(NAPIConfig{BusyPollTimeout: 50 * time.Microsecond, Static: true}); err != nil {
		t.Fatal(err)
	}
	const id = 4242 // static add accepts any id >= 257 (KERNEL.md)
	if err := r.AddNAPIID(id); err != nil {
		t.Fatalf("AddNAPIID: %v", err)
	}
	if err := r.RemoveNAPIID(id); err != nil {
		t.Fatalf("RemoveNAPIID: %v", err)
	}
	if err := r.RemoveNAPIID(id); err == nil {
		t.Error("removing an id twice succeeded")
	}
	if err := r.UnregisterNAPI(); err != nil {
		t.Fatal(err)
	}
}

// newNetnsPair makes two network namespaces joined by a veth pair with GRO
// on and TSO off on both ends, so TCP sockets on it get NAPI ids
// (KERNEL.md).
func newNetnsPair(t *testing.T) *veth.Pair {
	t.Helper()
	if err := veth.Requirements(); err != nil {
		var te *veth.ToolError
		if errors.As(err, &te) {
			t.Skipf("%s not installed (apt-get install iproute2 ethtool)", te.Tool)
		}
		t.Skipf("two network namespaces joined by a veth pair, where TCP sockets have NAPI ids (loopback's have none): %v", err)
	}
	p, err := veth.New(veth.Config{Tag: "uring", AddrA: "10.213.7.1/24", AddrB: "10.213.7.2/24"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// inNetns runs f on a thread switched into network namespace ns. Sockets
// created by f stay in ns.
func inNetns(t *testing.T, ns string, f func()) {
	t.Helper()
	if err := veth.InNetNS(veth.Path(ns), func() error { f(); return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestNAPIStaticVeth reads the NAPI id of a TCP connection over a veth pair
// between two namespaces and registers it with a ring in static mode; then
// a receive through the busy-polling ring still works.
func TestNAPIStaticVeth(t *testing.T) {
	needFeatures(t, FeatNAPIStatic)
	p := newNetnsPair(t)
	addrA := netip.MustParseAddr(p.IPA()).As4()
	var lfd, cfd int
	var err error
	inNetns(t, p.NSA, func() {
		lfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			err = unix.Bind(lfd, &unix.SockaddrInet4{Addr: addrA, Port: 7070})
		}
		if err == nil {
			err = unix.Listen(lfd, 8)
		}
	})
	if lfd > 0 {
		closeFd(t, lfd)
	}
	if err != nil {
		t.Fatal(err)
	}
	inNetns(t, p.NSB, func() {
		cfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			err = unix.Connect(cfd, &unix.SockaddrInet4{Addr: addrA, Port: 7070})
		}
	})
	if cfd > 0 {
		closeFd(t, cfd)
	}
	if err != nil {
		t.Fatal(err)
	}
	sfd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	closeFd(t, sfd)
	if _, err := unix.Write(cfd, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	if _, err := unix.Read(sfd, b[:]); err != nil {
		t.Fatal(err)
	}
	id, err := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
	if err != nil {
		t.Fatal(err)
	}
	if id < 257 {
		t.Fatalf("SO_INCOMING_NAPI_ID = %d over veth with GRO on/TSO off, want a NAPI id >= 257", id)
	}
	t.Logf("NAPI id %d", id)

	r := newRing(t, &Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true})
	if _, err := r.RegisterNAPI(NAPIConfig{BusyPollTimeout: 50 * time.Microsecond, PreferBusyPoll: true, Static: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.AddNAPIID(uint32(id)); err != nil {
		t.Fatalf("AddNAPIID(%d): %v", id, err)
	}
	buf := offHeap(t, 64)
	sqe(t, r).PrepRecv(sfd, buf, 0, 1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(cfd, []byte("pong")); err != nil {
		t.Fatal(err)
	}
	if c := reap(t, r, 1)[0]; c.Res != 4 || string(buf[:4]) != "pong" {
		t.Fatalf("recv with busy polling: %+v (%v) %q", c, c.Err(), buf[:4])
	}
	if err := r.RemoveNAPIID(uint32(id)); err != nil {
		t.Fatal(err)
	}
	if err := r.UnregisterNAPI(); err != nil {
		t.Fatal(err)
	}
}

// TestRegisterNAPISubMicrosecond checks that a busy-poll timeout below the
// kernel's microsecond resolution busy-polls for a microsecond instead of
// being truncated to 0, which turns busy polling off: the next registration
// reports 1µs as the previous setting.
func TestRegisterNAPISubMicrosecond(t *testing.T) {
	needFeatures(t, FeatNAPI)
	r := newRing(t, nil)
	_, err := r.RegisterNAPI(NAPIConfig{BusyPollTimeout: 500 * time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.UnregisterNAPI()
	prev, err := r.RegisterNAPI(NAPIConfig{BusyPollTimeout: 1500 * time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if prev.BusyPollTimeout != time.Microsecond {
		t.Errorf("a 500ns busy-poll timeout was registered as %v, want 1µs", prev.BusyPollTimeout)
	}
	if prev, err = r.RegisterNAPI(NAPIConfig{}); err != nil {
		t.Fatal(err)
	}
	if prev.BusyPollTimeout != 2*time.Microsecond {
		t.Errorf("a 1.5µs busy-poll timeout was registered as %v, want 2µs (rounded up)", prev.BusyPollTimeout)
	}
	// A negative timeout is none, not 2^32-1 µs of busy polling.
	if _, err = r.RegisterNAPI(NAPIConfig{BusyPollTimeout: -time.Microsecond}); err != nil {
		t.Fatal(err)
	}
	if prev, err = r.RegisterNAPI(NAPIConfig{}); err != nil {
		t.Fatal(err)
	}
	if prev.BusyPollTimeout != 0 {
		t.Errorf("a negative busy-poll timeout was registered as %v, want 0", prev.BusyPollTimeout)
	}
}

// TestNAPIIDErrors checks that AddNAPIID and RemoveNAPIID on a kernel with
// static tracking report a misuse as EINVAL, not as a missing feature (which
// a caller degrades on): adding to a ring not registered for static
// tracking, and adding an id below the NAPI range.
func TestNAPIIDErrors(t *testing.T) {
	needFeatures(t, FeatNAPIStatic)
	r := newRing(t, nil)
	if _, err := r.RegisterNAPI(NAPIConfig{Static: true}); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, unix.EINVAL) || errors.Is(err, ErrNotSupported) {
			t.Errorf("%s: %v, want EINVAL and not ErrNotSupported", what, err)
		}
	}
	check("AddNAPIID(5) with static tracking", r.AddNAPIID(5))
	if err := r.UnregisterNAPI(); err != nil {
		t.Fatal(err)
	}
	check("AddNAPIID after UnregisterNAPI", r.AddNAPIID(4242))
	check("RemoveNAPIID after UnregisterNAPI", r.RemoveNAPIID(4242))
	if _, err := r.RegisterNAPI(NAPIConfig{}); err != nil {
		t.Fatal(err)
	}
	defer r.UnregisterNAPI()
	check("AddNAPIID with dynamic tracking", r.AddNAPIID(4242))
}

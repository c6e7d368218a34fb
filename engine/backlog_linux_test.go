package engine

import (
	"encoding/binary"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TestListenBacklog listens with ListenConfig.Backlog 0, 16, one past
// net.core.somaxconn and -1, and reads each socket's backlog back from
// the kernel (sock_diag): the default 4096 and any backlog are capped at
// somaxconn, and a negative one is somaxconn, as ListenConfig.Backlog
// says.
func TestListenBacklog(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		t.Skipf("net.core.somaxconn not readable: %v", err)
	}
	somaxconn, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(testBackends[0])
	cfg.CPUs = []int{0}
	e := newEngine(t, cfg, &echoHandler{})
	defer e.Shutdown(t.Context())
	for _, tc := range []struct{ backlog, want int }{
		{0, min(4096, somaxconn)},
		{16, min(16, somaxconn)},
		{somaxconn + 1, somaxconn},
		{-1, somaxconn},
	} {
		ln, err := e.Listen("tcp", "127.0.0.1:0", &ListenConfig{Backlog: tc.backlog})
		if err != nil {
			t.Fatalf("Backlog %d: %v", tc.backlog, err)
		}
		got := listenBacklog(t, ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		if got != tc.want {
			t.Errorf("Backlog %d: the socket's is %d, want %d (somaxconn %d)", tc.backlog, got, tc.want, somaxconn)
		}
	}
}

// listenBacklog returns the backlog of the IPv4 TCP socket listening on
// port, as inet_diag reports it (idiag_wqueue of a listener:
// sk_max_ack_backlog).
func listenBacklog(t *testing.T, port int) int {
	t.Helper()
	c, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, nil)
	if err != nil {
		t.Skipf("NETLINK_SOCK_DIAG: %v", err)
	}
	defer c.Close()
	// struct inet_diag_req_v2 (include/uapi/linux/inet_diag.h): family,
	// protocol, ext, pad, states, then the socket id, whose source port
	// (big-endian) is the first field.
	req := make([]byte, 56)
	req[0], req[1] = unix.AF_INET, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(req[4:], 1<<unix.BPF_TCP_LISTEN)
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.SOCK_DIAG_BY_FAMILY, Flags: netlink.Request | netlink.Dump},
		Data:   req,
	})
	if err != nil {
		t.Fatalf("sock_diag dump: %v", err)
	}
	// struct inet_diag_msg: family, state, timer, retrans, the socket id
	// (48 bytes, source port first), expires, rqueue, wqueue.
	for _, m := range msgs {
		if len(m.Data) >= 64 && int(binary.BigEndian.Uint16(m.Data[4:])) == port {
			return int(binary.NativeEndian.Uint32(m.Data[60:]))
		}
	}
	t.Fatalf("sock_diag lists no TCP listener on port %d", port)
	return 0
}

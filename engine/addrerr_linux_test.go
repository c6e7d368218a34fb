package engine

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestListenErrorNamesAddress listens on addresses already taken (a TCP
// port, a Unix socket's path, an abstract Unix name) and on a path in a
// directory that does not exist: the error names the address, as package
// net's does ("listen tcp 127.0.0.1:port: bind: address already in use").
// It named none ("listen tcp: bind: address already in use"), so a service
// with several listeners could not tell which failed.
func TestListenErrorNamesAddress(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, _ := startEngine(t, testConfig(b), &echoHandler{})
			dir := t.TempDir()
			abstract := fmt.Sprintf("@spindle-listen-error-%d-%s", os.Getpid(), b)
			for _, tc := range []struct {
				name, network, address string
				want                   error
			}{
				{"tcp port taken", "tcp", "", unix.EADDRINUSE},
				{"unix path taken", "unix", filepath.Join(dir, "taken"), unix.EADDRINUSE},
				{"abstract name taken", "unix", abstract, unix.EADDRINUSE},
				{"unix path in no directory", "unix", filepath.Join(dir, "none", "s"), unix.ENOENT},
			} {
				t.Run(tc.name, func(t *testing.T) {
					if tc.want == unix.EADDRINUSE {
						address := tc.address
						if address == "" {
							address = "127.0.0.1:0"
						}
						held, err := net.Listen(tc.network, address)
						if err != nil {
							t.Fatal(err)
						}
						defer held.Close()
						tc.address = held.Addr().String()
					}
					ln, err := e.Listen(tc.network, tc.address, nil)
					if err == nil {
						ln.Close()
						t.Fatalf("Listen %s %s succeeded, want %v", tc.network, tc.address, tc.want)
					}
					wantOpErrorAddr(t, "Listen "+tc.network+" "+tc.address, err, tc.want, tc.address)
				})
			}
		})
	}
}

// TestDialOutOfDescriptorsNamesAddress dials with no descriptor left for
// the socket: Dial's error names the address dialed, as its connect's
// errors do. The socket's named none ("dial tcp: socket: too many open
// files").
func TestDialOutOfDescriptorsNamesAddress(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			e, addr := startEngine(t, cfg, &echoHandler{})
			l := e.Loops()[0]
			syncLoop(l) // running, its descriptors open
			res := make(chan error, 1)
			var got error
			err := withFreeFds(0, func() error {
				l.Post(func() {
					c, err := l.Dial("tcp", addr, 0)
					if err == nil {
						c.Close()
					}
					res <- err
				})
				got = <-res
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wantOpErrorAddr(t, "Dial out of descriptors", got, unix.EMFILE, addr)
		})
	}
}

// TestDialTLSConfigErrorNamesAddress dials TLS without a ServerName to
// addresses that give it none (an empty host, a Unix path): DialTLS fails
// at once, and its error names the address dialed, as Dial's do. It named
// none ("dial tcp: engine: DialTLS to an address without a host needs
// ...").
func TestDialTLSConfigErrorNamesAddress(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			e, _ := startEngine(t, cfg, &echoHandler{})
			l := e.Loops()[0]
			for _, tc := range []struct{ network, address, want string }{
				{"tcp", ":443", "127.0.0.1:443"},
				{"tcp6", ":443", "[::1]:443"},
				{"unix", "/run/spindle-none.sock", "/run/spindle-none.sock"},
			} {
				res := make(chan error, 1)
				l.Post(func() {
					c, err := l.DialTLS(tc.network, tc.address, 0, nil)
					if err == nil {
						c.Close()
					}
					res <- err
				})
				got := <-res
				var oe *net.OpError
				switch {
				case !errors.As(got, &oe) || !strings.Contains(got.Error(), "needs tls.Config.ServerName"):
					t.Errorf("DialTLS %s %s without ServerName: %v (%T), want a *net.OpError saying ServerName is needed", tc.network, tc.address, got, got)
				case oe.Addr == nil || oe.Addr.String() != tc.want:
					t.Errorf("DialTLS %s %s error %q names Addr %v, want %s", tc.network, tc.address, got, oe.Addr, tc.want)
				}
			}
		})
	}
}

// TestDialSaysNamesAreNotResolved: Dial takes an IP address, "localhost"
// or an empty host (127.0.0.1, ::1 for tcp6) and a numeric port; any
// other host, or a port by service name, is an error that says Dial does
// not resolve names and names what it did not resolve (Listen's the
// same). It was netip's parse error ("ParseAddr(\"example.com\"): unable
// to parse IP"), which did not say names are not resolved.
func TestDialSaysNamesAreNotResolved(t *testing.T) {
	for _, tc := range []struct {
		network, address string
		listen           bool
		want             string // the address taken, or what the error says
	}{
		{"tcp", "localhost:80", false, "127.0.0.1:80"},
		{"tcp4", "localhost:80", false, "127.0.0.1:80"},
		{"tcp6", "localhost:80", false, "[::1]:80"},
		{"tcp", ":80", false, "127.0.0.1:80"},
		{"tcp6", ":80", false, "[::1]:80"},
		{"tcp", "192.0.2.1:80", false, "192.0.2.1:80"},
		{"tcp", "example.com:80", false, `engine: Dial does not resolve names: host "example.com" is not an IP address`},
		{"tcp6", "example.com:80", false, `engine: Dial does not resolve names: host "example.com" is not an IP address`},
		{"tcp", "127.0.0.1:http", false, `engine: Dial does not resolve names: port "http" is not a number`},
		{"tcp", "localhost:https", false, `engine: Dial does not resolve names: port "https" is not a number`},
		{"tcp", "example.com:80", true, `engine: Listen does not resolve names: host "example.com" is not an IP address`},
	} {
		sa, _, err := resolve(&zoneCache{}, tc.network, tc.address, tc.listen)
		var got string
		if err != nil {
			got = err.Error()
		} else {
			got = addrPort(sa, nil).String()
		}
		if got != tc.want {
			t.Errorf("%s %s (listen %v): %s, want %s", tc.network, tc.address, tc.listen, got, tc.want)
		}
	}
	// A port out of range is no name: the parse error says what is wrong.
	if _, _, err := sockaddr(&zoneCache{}, "tcp", "127.0.0.1:70000"); err == nil || strings.Contains(err.Error(), "resolve") {
		t.Errorf("port 70000: %v, want a parse error", err)
	}
}

// wantOpErrorAddr fails t unless err, from what, is a *net.OpError wrapping
// want whose Addr is addr.
func wantOpErrorAddr(t *testing.T, what string, err, want error, addr string) {
	t.Helper()
	var oe *net.OpError
	switch {
	case !errors.As(err, &oe) || !errors.Is(err, want):
		t.Fatalf("%s: %v (%T), want a *net.OpError with %v", what, err, err, want)
	case oe.Addr == nil || oe.Addr.String() != addr:
		t.Errorf("%s: error %q names Addr %v, want %s", what, err, oe.Addr, addr)
	}
}

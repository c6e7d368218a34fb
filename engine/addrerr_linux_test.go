package engine

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
					var oe *net.OpError
					switch {
					case !errors.As(err, &oe) || !errors.Is(err, tc.want):
						t.Fatalf("Listen %s %s: %v (%T), want a *net.OpError with %v", tc.network, tc.address, err, err, tc.want)
					case oe.Addr == nil || oe.Addr.String() != tc.address:
						t.Errorf("Listen error %q names Addr %v, want %s", err, oe.Addr, tc.address)
					}
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
			var oe *net.OpError
			switch {
			case !errors.As(got, &oe) || !errors.Is(got, unix.EMFILE):
				t.Fatalf("Dial out of descriptors: %v (%T), want a *net.OpError with EMFILE", got, got)
			case oe.Addr == nil || oe.Addr.String() != addr:
				t.Errorf("Dial error %q names Addr %v, want %s", got, oe.Addr, addr)
			}
		})
	}
}

package engine

import (
	"errors"
	"net"
	"testing"
	"time"
)

// TestWritevWithNothingAfterCloseReturnsErrClosed calls Write and Writev
// with nothing to write on a connection its handler has closed (Close) or
// half-closed (CloseWrite): each returns net.ErrClosed, as Write with
// bytes does. Writev with no slices returned nil on a plain connection
// (it only asked Write, once per slice), taking a write after Close
// silently, where a TLS connection's Writev said ErrClosed.
func TestWritevWithNothingAfterCloseReturnsErrClosed(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			type result struct {
				call string
				err  error
			}
			res := make(chan []result, 2)
			h := &BaseHandlerFunc{open: func(c *Conn) {
				var got []result
				c.CloseWrite()
				_, err := c.Writev(nil)
				got = append(got, result{"Writev(nil) after CloseWrite", err})
				c.Close()
				_, err = c.Write(nil)
				got = append(got, result{"Write(nil) after Close", err})
				_, err = c.Writev(nil)
				got = append(got, result{"Writev(nil) after Close", err})
				_, err = c.Writev([][]byte{})
				got = append(got, result{"Writev of no slices after Close", err})
				res <- got
			}}
			_, addr := startEngine(t, testConfig(b), h)
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			select {
			case got := <-res:
				for _, r := range got {
					if !errors.Is(r.err, net.ErrClosed) {
						t.Errorf("%s: %v, want net.ErrClosed", r.call, r.err)
					}
				}
			case <-time.After(10 * time.Second):
				t.Fatal("OnOpen not called")
			}
		})
	}
}

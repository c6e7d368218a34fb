package engine

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/testnet"
)

// TestTLSWritevGathers: Writev on a TLS connection encrypts the slices
// that fit in a record together as one record (Write makes a record of
// each slice: an HTTP/2 response, a frame header, a body and what was
// pending, went as three), and slices larger than a record, mixed with
// small ones, arrive whole and in order.
func TestTLSWritevGathers(t *testing.T) {
	small := [][]byte{bytes.Repeat([]byte("h"), 9), bytes.Repeat([]byte("b"), 50), bytes.Repeat([]byte("p"), 300)}
	big := make([]byte, 40000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	mixed := [][]byte{small[0], big, small[0], small[2], big[:tlsGather-5], big[:tlsGather]}
	want := map[byte][]byte{'s': bytes.Join(small, nil), 'm': bytes.Join(mixed, nil)}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &BaseHandlerFunc{data: func(c *Conn, buf Buffer) bool {
				for _, x := range buf.Bytes() {
					vec := small
					if x == 'm' {
						vec = mixed
					}
					if n, err := c.Writev(vec); n != len(want[x]) || err != nil {
						t.Errorf("Writev: %d, %v; want %d", n, err, len(want[x]))
					}
				}
				buf.Release()
				return true
			}}
			_, addr := startTLSEngine(t, testConfig(b), h, &ListenConfig{TLS: serverTLS()})
			raw, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			rc := &testnet.RecordCounter{Conn: raw}
			c := tls.Client(rc, clientTLS(tls.VersionTLS13))
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			ask := func(x byte) {
				t.Helper()
				if _, err := c.Write([]byte{x}); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(want[x]))
				if _, err := io.ReadFull(c, got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want[x]) {
					t.Fatalf("%q: the reply differs from the slices written", x)
				}
			}
			ask('s') // the session tickets come before it
			ask('m')
			const n = 20
			before := rc.Records()
			for range n {
				ask('s')
			}
			if per := float64(rc.Records()-before) / n; per != 1 {
				t.Errorf("%.2f TLS records per Writev of %d small slices, want 1", per, len(small))
			}
		})
	}
}

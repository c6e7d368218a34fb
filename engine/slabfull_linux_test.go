package engine

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriteWhenSlabCannotGrow writes four buffers' worth to a connection
// whose loop has three send-slab chunks free and cannot map more (mmap
// fails with ENOMEM, through the slab's mapping function): Write queues
// three, returns their count with the error, and the queue, at the
// high-water mark of two buffers now, pauses reading as any write that
// reaches the mark does; the peer gets the three buffers, nothing lost.
// Write returned before its mark check: reading went on past the mark.
func TestWriteWhenSlabCannotGrow(t *testing.T) {
	const size = 4 << 10
	data := pattern(7, 4*size)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			type result struct {
				n, buffered int
				err         error
				atMark      bool
			}
			res := make(chan result, 1)
			h := &BaseHandlerFunc{open: func(c *Conn) {
				var n int
				var err error
				withSlabFull(c.Loop(), 3, func() { n, err = c.Write(data) })
				res <- result{n, c.Buffered(), err, c.atMark()}
				c.CloseWrite()
			}}
			cfg := testConfig(b)
			cfg.ReadBufferSize = size
			cfg.WriteHighWater = 2 * size
			_, addr := startEngine(t, cfg, h)
			client := mustDial(t, "tcp", addr)
			r := <-res
			if r.n != 3*size || r.buffered != r.n || !errors.Is(r.err, unix.ENOMEM) {
				t.Errorf("Write of %d bytes with 3 chunks of %d free: %d, %v (%d buffered); want %d, ENOMEM", len(data), size, r.n, r.err, r.buffered, 3*size)
			}
			if !r.atMark {
				t.Errorf("a queue of %d bytes (3 buffers) with the mark at 2 buffers: reading not paused", r.buffered)
			}
			client.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(client)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data[:r.n]) {
				t.Errorf("the peer got %d bytes, want the %d Write queued", len(got), r.n)
			}
		})
	}
}

// TestTLSWriteWhenSlabCannotGrow: on a TLS connection, a record that the
// send slab could take only part of (a new region's mapping failing: out
// of memory) breaks the stream mid-record, and crypto/tls refuses every
// write after it. The connection is reset with the error (OnClose gets
// it); it stayed open, its peer waiting for the rest of a record that
// could never come.
func TestTLSWriteWhenSlabCannotGrow(t *testing.T) {
	const size = 4 << 10
	data := pattern(9, 4*size)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			wrote := make(chan error, 1)
			closed := make(chan error, 1)
			h := &BaseHandlerFunc{open: func(c *Conn) {
				var err error
				withSlabFull(c.Loop(), 3, func() { _, err = c.Write(data) }) // one record of 16 KiB: 5 buffers
				wrote <- err
			}, closed: func(c *Conn, err error) { closed <- err }}
			cfg := testConfig(b)
			cfg.ReadBufferSize = size
			_, addr := startTLSEngine(t, cfg, h, &ListenConfig{TLS: serverTLS()})
			client, err := dialTLS(addr, clientTLS(tls.VersionTLS13))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			if err := <-wrote; !errors.Is(err, unix.ENOMEM) {
				t.Errorf("Write of a record the slab cannot take: %v, want ENOMEM", err)
			}
			select {
			case err := <-closed:
				if !errors.Is(err, unix.ENOMEM) {
					t.Errorf("OnClose: %v, want ENOMEM", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the connection still open 10s after its stream broke mid-record")
			}
			client.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := io.Copy(io.Discard, client); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("the client read %d bytes, then %v; want the connection's reset", n, err)
			}
		})
	}
}

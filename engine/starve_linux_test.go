package engine

import (
	"bytes"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"
)

// TestStarvedReceiveRearms echoes bursts through a receive ring of two
// 512-byte buffers, so that receives keep ending with ENOBUFS: each must be
// re-armed, including one whose ENOBUFS the SQPOLL thread posted just before
// the loop gave buffers back (handled after that, it used to wait for a
// buffer release that never came, and the connection stopped reading).
func TestStarvedReceiveRearms(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.ReadBuffers, cfg.ReadBufferSize = 2, 512
			cfg.CPUs = []int{runtime.NumCPU() - 1}
			e, addr := startEngine(t, cfg, &echoHandler{})
			for i := range 20 {
				if err := burstEcho(addr, uint64(i), 1000, 1024); err != nil {
					t.Fatalf("connection %d: %v (%d receives ran out of buffers)", i, err, e.Stats().NoBufs)
				}
			}
			t.Logf("%d receives ran out of buffers", e.Stats().NoBufs)
		})
	}
}

// burstEcho writes msgs messages of size bytes with uneven gaps (up to 40
// µs of spinning) while reading the echo back, and checks it. It fails when
// the echo stops: nothing read for 5 s. The whole burst has no deadline:
// through two 512-byte buffers a 1 MiB echo is some 2,000 receives, each a
// round trip through the loop (and SQPOLL's thread), and on a loaded 2-CPU
// machine one took 6.4 s, never waiting a second for its next bytes (a 5 s
// deadline on the whole burst failed there now and then). A write blocked
// by a server that stopped reading ends with the deferred Close.
func burstEcho(addr string, seed uint64, msgs, size int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	msg := pattern(seed, size)
	werr := make(chan error, 1)
	go func() {
		for k := range msgs {
			if _, err := c.Write(msg); err != nil {
				werr <- err
				return
			}
			for t0 := time.Now(); time.Since(t0) < time.Duration(k%40)*time.Microsecond; {
			}
		}
		werr <- nil
	}()
	got := make([]byte, msgs*size)
	for n := 0; n < len(got); {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		m, err := c.Read(got[n:])
		n += m
		if err != nil {
			return fmt.Errorf("reading the echo, %d of %d bytes read: %w", n, len(got), err)
		}
	}
	if err := <-werr; err != nil {
		return err
	}
	for k := range msgs {
		if !bytes.Equal(got[k*size:(k+1)*size], msg) {
			return fmt.Errorf("message %d garbled", k)
		}
	}
	return nil
}

package engine

import (
	"bytes"
	"fmt"
	"io"
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
// µs of spinning) while reading the echo back, and checks it.
func burstEcho(addr string, seed uint64, msgs, size int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
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
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("reading the echo: %w", err)
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

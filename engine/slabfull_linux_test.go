package engine

import (
	"bytes"
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
				l := c.Loop()
				var taken []int32
				for len(l.chunks.free) > 3 {
					id, _ := l.chunks.get()
					taken = append(taken, id)
				}
				mapf := l.chunks.mapf
				l.chunks.mapf = func(int, bool) ([]byte, string, error) {
					return nil, "", os.NewSyscallError("mmap", unix.ENOMEM)
				}
				n, err := c.Write(data)
				l.chunks.mapf = mapf
				for _, id := range taken {
					l.chunks.put(id)
				}
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

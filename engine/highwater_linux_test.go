package engine

import (
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// markHandler queues reply when a connection opens and counts what it
// receives, and what of that while its own queue holds the mark.
type markHandler struct {
	BaseHandler
	reply    []byte
	hwm      int
	got      atomic.Int64 // bytes received
	over     atomic.Int64 // of them, while the queue held hwm or more
	writable atomic.Int64 // OnWritable calls
}

func (h *markHandler) OnOpen(c *Conn) {
	// A fixed send buffer (no autotuning): the sends stop at once.
	unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 64<<10)
	c.Write(h.reply)
}

func (h *markHandler) OnData(c *Conn, b Buffer) bool {
	h.got.Add(int64(b.Len()))
	if c.QueuedMemory() >= h.hwm {
		h.over.Add(int64(b.Len()))
	}
	return false
}

func (h *markHandler) OnWritable(*Conn) { h.writable.Add(1) }

// TestReadPastHighWater: with Config.ReadPastHighWater a connection whose
// peer does not read keeps being read (a proxy must read the answer of an
// upstream it cannot send more to), in receives limited to the size of the
// mark, not to the room its queue leaves below it, and OnWritable
// still comes once its queue drains below half the mark; without it,
// reading pauses at the mark and resumes with OnWritable, as before.
func TestReadPastHighWater(t *testing.T) {
	const hwm, sent = 64 << 10, 1 << 20
	reply := make([]byte, 2<<20)
	for _, b := range testBackends {
		for _, past := range []bool{true, false} {
			name := string(b) + "/pause"
			if past {
				name = string(b) + "/read-past"
			}
			t.Run(name, func(t *testing.T) {
				cfg := testConfig(b)
				cfg.WriteHighWater = hwm
				cfg.ReadBufferSize = 4 << 10
				cfg.ReadPastHighWater = past
				h := &markHandler{reply: reply, hwm: hwm}
				e, addr := startEngine(t, cfg, h)
				// A small fixed receive buffer (no autotuning), so that
				// the kernel takes a few hundred KiB of the reply at most
				// and the rest stays queued.
				d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
					rc.Control(func(fd uintptr) {
						unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10)
					})
					return nil
				}}
				c, err := d.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				// The reply fills the kernel's buffers: no more sends.
				st := e.Stats()
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
					time.Sleep(100 * time.Millisecond)
					n := e.Stats()
					if n.BytesWritten > 0 && n.BytesWritten == st.BytesWritten && n.SQEs == st.SQEs {
						break
					}
					st = n
				}
				sqes := st.SQEs
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := c.Write(make([]byte, sent)); err != nil {
					t.Fatal(err)
				}
				if past {
					waitFor(t, "the data sent", func() bool { return h.got.Load() == sent })
					if o := h.over.Load(); o != sent {
						t.Errorf("%d of %d bytes arrived while the queue held the mark, want all", o, sent)
					}
					// Receives limited to the room below the mark, counting
					// the queue past it, would end at each buffer and be
					// armed again: an SQE per buffer, not per mark. A
					// receive that found the buffer ring empty (a loop
					// behind on a loaded machine) is armed again too: those
					// re-arms are not counted against the bound.
					if _, limited := connMemory(e); limited {
						end := e.Stats()
						if n, most := end.SQEs-sqes-(end.NoBufs-st.NoBufs), uint64(sent/cfg.ReadBufferSize/4); n > most {
							t.Errorf("%d bytes took %d SQEs to receive (%d receives without a buffer not counted), want at most %d", sent, n, end.NoBufs-st.NoBufs, most)
						}
					}
				} else {
					time.Sleep(200 * time.Millisecond)
					if g := h.got.Load(); g != 0 {
						t.Errorf("%d bytes delivered while the queue held the mark, want none", g)
					}
				}
				if w := h.writable.Load(); w != 0 {
					t.Errorf("OnWritable called %d times before the peer read", w)
				}
				if _, err := io.ReadFull(c, make([]byte, len(reply))); err != nil {
					t.Fatalf("reading the reply: %v", err)
				}
				waitFor(t, "OnWritable", func() bool { return h.writable.Load() > 0 })
				waitFor(t, "the data sent", func() bool { return h.got.Load() == sent })
				// The mark was reached once: the handler pauses what feeds
				// the queue then, when the engine does not.
				if p := e.Stats().PausedReads; p != 1 {
					t.Errorf("PausedReads %d, want 1", p)
				}
			})
		}
	}
}

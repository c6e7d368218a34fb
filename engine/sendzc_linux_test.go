package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
	"github.com/spindlenet/spindle/uring"
)

// TestSendZCChunkGivenBackOnce hands the loop's dispatch the completions
// the kernel posts for a SEND_ZC of a connection (flush's bookkeeping for
// it done by hand: no kernel fault to inject) and checks that the slab
// chunk it sends from goes back to the slab exactly once, after the last
// completion the kernel posts for it, and what Stats counts:
//   - sent, the result with More: at the notification, which reports a
//     copy counted in ZCCopied;
//   - linked and cancelled with its chain, the result ECANCELED without
//     More: at the notification that follows all the same
//     (uring.TestSendZCLinkCancelledNotifies), whose copy ZCCopied leaves
//     out, as nothing was sent;
//   - first of its chain, the result ENOMEM without More (the kernel could
//     not allocate the notification): at the result, as no notification
//     follows; counted in ZCNoNotif.
//
// Before, the third kept its chunk pinned for the loop's life, and the
// second counted a copy.
func TestSendZCChunkGivenBackOnce(t *testing.T) {
	cfg := testConfig(BackendURing)
	cfg.CPUs = []int{0}
	var zc zcLog
	cfg.SendZCThreshold, cfg.Logf = 512, zc.logf
	conns := make(chan *Conn, 1)
	_, addr := startEngine(t, cfg, &BaseHandlerFunc{open: func(c *Conn) { conns <- c }})
	peer := mustDial(t, "tcp", addr)
	defer peer.Close()
	c := <-conns
	l := c.Loop()
	for _, tc := range []struct {
		name        string
		op          uint64
		result      uring.CQE // its UserData set below
		notif       bool      // a notification follows the result
		freedResult bool      // the chunk is free after the result
		copied      uint64    // ZCCopied's growth
		noNotif     uint64    // ZCNoNotif's growth
	}{
		{"sent", opSendZC, uring.CQE{Res: 600, Flags: sys.IORING_CQE_F_MORE}, true, false, 1, 0},
		{"linked and cancelled", opSendZCLinked, uring.CQE{Res: -int32(unix.ECANCELED)}, true, false, 0, 0},
		{"no notification", opSendZC, uring.CQE{Res: -int32(unix.ENOMEM)}, false, true, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dispatch := func() error {
				b, ok := l.be.(*uringBackend)
				if !ok || b.zcMin == 0 {
					return errors.New("the loop runs without SEND_ZC (see the engine's log)")
				}
				id, err := l.chunks.get()
				if err != nil || id >= b.zcChunks {
					return fmt.Errorf("no chunk of the registered region free (%d, %v)", id, err)
				}
				// What flush does for one SEND_ZC of the chunk. A send
				// that succeeds gives it up from the write queue (sent);
				// the chunk of one that fails has left it already (the
				// connection aborted by the failure that cancelled it,
				// or closing).
				l.chunks.pin(id)
				if tc.result.Res > 0 {
					c.wq = append(c.wq, seg{ref: id, end: tc.result.Res})
					c.queued += int(tc.result.Res)
					c.qmem += l.chunks.size
				} else {
					l.chunks.put(id)
				}
				c.k.sends++
				c.k.inflight++
				b.inflight++
				free := func() int {
					n := 0
					for f := range slices.Values(l.chunks.free) {
						if f == id {
							n++
						}
					}
					return n
				}
				before := l.Stats()
				ud := udata(tc.op, c.slot, uint32(id))
				res := tc.result
				res.UserData = ud
				b.handle(res)
				want := 0
				if tc.freedResult {
					want = 1
				}
				if got := free(); got != want {
					return fmt.Errorf("after the result the chunk is free %d times, want %d", got, want)
				}
				if tc.notif {
					b.handle(uring.CQE{UserData: ud, Flags: sys.IORING_CQE_F_NOTIF, Res: math.MinInt32}) // IORING_NOTIF_USAGE_ZC_COPIED, bit 31)
					if got := free(); got != 1 {
						return fmt.Errorf("after the notification the chunk is free %d times, want 1", got)
					}
				}
				if p := l.chunks.pins[id]; p != 0 {
					return fmt.Errorf("the chunk's pin count is %#x at the end, want 0", p)
				}
				after := l.Stats()
				if got := after.ZCCopied - before.ZCCopied; got != tc.copied {
					return fmt.Errorf("ZCCopied grew by %d, want %d", got, tc.copied)
				}
				if got := after.ZCNoNotif - before.ZCNoNotif; got != tc.noNotif {
					return fmt.Errorf("ZCNoNotif grew by %d, want %d", got, tc.noNotif)
				}
				return nil
			}
			errc := make(chan error, 1)
			l.Post(func() { errc <- dispatch() })
			if err := <-errc; err != nil {
				zc.skipShortOfLockedMemory(t)
				t.Fatal(err)
			}
		})
	}
}

package uring

import (
	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// CQE is a completion, copied out of the ring by PeekCQEs: UserData of the
// SQE, Res (>= 0 result, or a negated errno) and IORING_CQE_F_* Flags.
type CQE sys.CQE

// More reports IORING_CQE_F_MORE: the multishot request that posted this CQE
// stays armed and will post more. Without it, a multishot request has ended
// and must be re-armed.
//
// Any goroutine: a CQE is a copied value.
func (c CQE) More() bool { return c.Flags&sys.IORING_CQE_F_MORE != 0 }

// BufferID returns the provided buffer the kernel picked (IORING_CQE_F_BUFFER).
//
// Any goroutine: a CQE is a copied value.
func (c CQE) BufferID() (uint16, bool) {
	if c.Flags&sys.IORING_CQE_F_BUFFER == 0 {
		return 0, false
	}
	return uint16(c.Flags >> sys.IORING_CQE_BUFFER_SHIFT), true
}

// Notif reports IORING_CQE_F_NOTIF: this is the SEND_ZC notification that the
// kernel no longer references the send buffer.
//
// Any goroutine: a CQE is a copied value.
func (c CQE) Notif() bool { return c.Flags&sys.IORING_CQE_F_NOTIF != 0 }

// ZCCopied reports, for a SEND_ZC notification, that the kernel copied the
// data instead of sending it zero-copy (IORING_NOTIF_USAGE_ZC_COPIED). The
// kernel reports a copy whenever no part of the send went out zero-copy
// (6.18, io_notif_tw_complete), so also for a send that failed and sent
// nothing: read it with the send's result.
//
// Any goroutine: a CQE is a copied value.
func (c CQE) ZCCopied() bool { return c.Notif() && uint32(c.Res)&sys.IORING_NOTIF_USAGE_ZC_COPIED != 0 }

// SockNonEmpty reports IORING_CQE_F_SOCK_NONEMPTY: when the receive
// completed, the socket had more for a receive to return at once, data or,
// on TCP, the end of stream. It does not say that data is queued: TCP counts
// a received FIN as one byte (tcp_inq_hint), so the flag is set when only
// the FIN is left, on the CQE that returns 0, and on every one after
// (TestSockNonEmptyAtEOF). Use it to receive again before waiting; a result
// of 0 is the end of stream whatever the flag says.
//
// Any goroutine: a CQE is a copied value.
func (c CQE) SockNonEmpty() bool { return c.Flags&sys.IORING_CQE_F_SOCK_NONEMPTY != 0 }

// BufMore reports IORING_CQE_F_BUF_MORE (incrementally consumed buffer rings).
//
// Any goroutine: a CQE is a copied value.
func (c CQE) BufMore() bool { return c.Flags&sys.IORING_CQE_F_BUF_MORE != 0 }

// Err returns the negative result as a unix.Errno, or nil when Res >= 0 (for
// SEND_ZC notifications, whose Res is a flag word, always nil). It does not
// allocate.
//
// Any goroutine: a CQE is a copied value.
func (c CQE) Err() error {
	if c.Res >= 0 || c.Notif() {
		return nil
	}
	return unix.Errno(-c.Res)
}

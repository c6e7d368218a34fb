package sys

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/kver"
)

func TestBufRingTailWord(t *testing.T) {
	b, err := NewBufRingMem(8)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unmap()
	b.Entries[0].Bid = 5
	b.PublishTail(0x1234)
	if b.Entries[0].Resv != 0x1234 || b.Entries[0].Bid != 5 || b.Tail() != 0x1234 {
		t.Errorf("tail %#x bid %d after PublishTail(0x1234)", b.Entries[0].Resv, b.Entries[0].Bid)
	}
	for _, n := range []int{0, 3, 1 << 16} {
		if _, err := NewBufRingMem(n); err == nil {
			t.Errorf("NewBufRingMem(%d) succeeded", n)
		}
	}
}

// TestRawRing drives a ring with the raw calls only: setup, map, one NOP
// through the shared memory, and an EXT_ARG timed wait.
// rawRing sets up a ring of 4 SQEs and 8 CQEs, closed when t ends.
func rawRing(t *testing.T) (int, Params) {
	var p Params
	p.Flags = IORING_SETUP_CQSIZE
	p.CQEntries = 8
	fd, err := Setup(4, &p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd, p
}

func TestRawRing(t *testing.T) {
	fd, p := rawRing(t)
	if p.SQEntries != 4 || p.CQEntries != 8 || p.Features&IORING_FEAT_EXT_ARG == 0 {
		t.Fatalf("params after setup: %+v", p)
	}
	m, err := MapRing(fd, &p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Unmap(); err != nil {
			t.Error(err)
		}
	}()
	if m.SQEntries != 4 || m.SQMask != 3 || m.CQEntries != 8 || m.CQMask != 7 || len(m.SQEs) != 4 || len(m.CQEs) != 8 {
		t.Fatalf("mapped ring sizes: sq %d/%d cq %d/%d", m.SQEntries, m.SQMask, m.CQEntries, m.CQMask)
	}
	tail := m.SQTail.Load()
	m.SQEs[tail&m.SQMask] = SQE{Opcode: IORING_OP_NOP, UserData: 0x5eed}
	m.SQArray[tail&m.SQMask] = tail & m.SQMask
	m.SQTail.Store(tail + 1)
	n, err := Enter(fd, 1, 1, IORING_ENTER_GETEVENTS, nil)
	if err != nil || n != 1 {
		t.Fatalf("Enter = %d, %v", n, err)
	}
	head := m.CQHead.Load()
	if m.CQTail.Load()-head != 1 {
		t.Fatalf("CQ holds %d entries", m.CQTail.Load()-head)
	}
	if c := m.CQEs[head&m.CQMask]; c.UserData != 0x5eed || c.Res != 0 {
		t.Errorf("CQE %+v", c)
	}
	m.CQHead.Store(head + 1)

	// EXT_ARG: wait for one completion with a 10 ms timeout: ETIME.
	m.Scratch.WaitTS = Timespec{Nsec: 10e6}
	_, err = Enter(fd, 0, 1, IORING_ENTER_GETEVENTS|IORING_ENTER_EXT_ARG, &m.Scratch.Wait)
	if err != unix.ETIME {
		t.Errorf("timed wait: %v, want ETIME", err)
	}
	if m.Scratch.Wait.Ts != Addr(&m.Scratch.WaitTS) {
		t.Error("EXT_ARG does not point at the scratch timespec")
	}

	// Registration of a probe through the raw call.
	var pr Probe
	if err := RegisterProbe(fd, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.LastOp < IORING_OP_SEND_ZC || pr.Ops[IORING_OP_NOP].Flags&IO_URING_OP_SUPPORTED == 0 {
		t.Errorf("probe: last op %d", pr.LastOp)
	}
}

// TestMapRingErrors fails MapRing's first mapping (not an io_uring fd) and
// a later one (an SQE array of size 0, after the rings are mapped): each
// must return an error, unmapping what it mapped, not panic.
func TestMapRingErrors(t *testing.T) {
	fd, p := rawRing(t)
	late := p
	late.SQEntries = 0 // the rings map; the SQE array, of size 0, does not
	for _, c := range []struct {
		name string
		fd   int
		p    *Params
	}{{"bad fd", -1, &p}, {"empty SQE array", fd, &late}} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("MapRing panicked: %v", v)
				}
			}()
			if m, err := MapRing(c.fd, c.p); err == nil {
				m.Unmap()
				t.Fatal("MapRing succeeded")
			} else {
				t.Logf("MapRing: %v", err)
			}
		})
	}
}

// TestMapRingRefusesWideEntries checks that MapRing refuses a ring set up
// with 128-byte SQEs or 32-byte CQEs (IORING_SETUP_SQE128, CQE32, 5.19;
// CQE_MIXED, 6.18), whose entries RingMem's 64-byte SQE and 16-byte CQE
// slices would misread: it mapped them, CQEs[1] being the second half of
// CQE 0, and the SQE array too short for the kernel's.
func TestMapRingRefusesWideEntries(t *testing.T) {
	for _, c := range []struct {
		name string
		flag uint32
		min  string
	}{
		{"SQE128", IORING_SETUP_SQE128, "5.19"},
		{"CQE32", IORING_SETUP_CQE32, "5.19"},
		{"CQE_MIXED", IORING_SETUP_CQE_MIXED, "6.18"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Params{Flags: c.flag}
			fd, err := Setup(4, &p)
			if err == unix.EINVAL && !kver.AtLeast(kver.Release(), c.min) {
				t.Skipf("IORING_SETUP_%s not supported (requires >= %s): %v", c.name, c.min, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			m, err := MapRing(fd, &p)
			if err == nil {
				m.Unmap()
				t.Fatalf("MapRing of a ring with %s succeeded", c.name)
			}
			if !errors.Is(err, unix.EINVAL) {
				t.Errorf("MapRing: %v, want EINVAL", err)
			}
		})
	}
}

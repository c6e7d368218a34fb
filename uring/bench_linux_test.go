package uring

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var errNoCQE = errors.New("no completion after SubmitAndWait")

// nopOnce submits one NOP and reaps its completion.
func nopOnce(r *Ring, cqes []CQE) error {
	r.GetSQE().PrepNop(1)
	if _, err := r.SubmitAndWait(1, 0); err != nil {
		return err
	}
	if r.PeekCQEs(cqes[:1]) != 1 || cqes[0].UserData != 1 {
		return errNoCQE
	}
	return nil
}

// echo is a one-ring echo over a loopback TCP pair: the client side sends,
// the server side receives into a provided buffer and sends that buffer
// back, the client receives. Both receives are multishot on one buffer ring.
type echo struct {
	r      *Ring
	b      *BufRing
	c, s   int
	msg    []byte
	cqes   []CQE
	client int // bytes echoed back in this round
}

const (
	udClientSend = 1
	udClientRecv = 2
	udServerRecv = 3
	udServerSend = 4 // | buffer id << 8
)

func newEcho(t testing.TB, size int) *echo {
	needFeatures(t, FeatMultishotRecv)
	r := newRing(t, &Config{Entries: 64, SingleIssuer: true, DeferTaskrun: true, RegisterRingFD: true})
	b, err := r.SetupBufRing(1, 64, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, s := tcpPair(t)
	for _, fd := range []int{c, s} {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
			t.Fatal(err)
		}
	}
	e := &echo{r: r, b: b, c: c, s: s, msg: offHeap(t, size), cqes: make([]CQE, 32)}
	for i := range e.msg {
		e.msg[i] = byte(i)
	}
	r.GetSQE().PrepRecvMultishot(c, 1, false, 0, udClientRecv)
	r.GetSQE().PrepRecvMultishot(s, 1, false, 0, udServerRecv)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	return e
}

var errEcho = errors.New("echo: unexpected completion")

// roundTrip sends len(msg) bytes and returns when all came back and every
// send completed.
func (e *echo) roundTrip() error {
	e.r.GetSQE().PrepSend(e.c, e.msg, 0, udClientSend)
	pending := 1 // sends in flight
	e.client = 0
	for e.client < len(e.msg) || pending > 0 {
		if _, err := e.r.SubmitAndWait(1, 0); err != nil {
			return err
		}
		n := e.r.PeekCQEs(e.cqes)
		for _, c := range e.cqes[:n] {
			if c.Res < 0 {
				return c.Err()
			}
			switch c.UserData & 0xff {
			case udClientSend:
				pending--
			case udServerRecv, udClientRecv:
				id, ok := c.BufferID()
				if !ok {
					return errEcho
				}
				if c.UserData == udServerRecv {
					e.r.GetSQE().PrepSend(e.s, e.b.Buf(id)[:c.Res], 0, udServerSend|uint64(id)<<8)
					pending++
				} else {
					e.client += int(c.Res)
					e.b.Recycle(id)
					e.b.Commit()
				}
				if !c.More() {
					fd := e.s
					if c.UserData == udClientRecv {
						fd = e.c
					}
					e.r.GetSQE().PrepRecvMultishot(fd, 1, false, 0, c.UserData)
				}
			case udServerSend:
				pending--
				e.b.Recycle(uint16(c.UserData >> 8))
				e.b.Commit()
			default:
				return errEcho
			}
		}
	}
	return nil
}

// BenchmarkNop is one NOP submitted and reaped per op (one io_uring_enter),
// for three ring setups; compare them within one run.
func BenchmarkNop(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  *Config
	}{
		{"plain", &Config{Entries: 64}},
		{"single-issuer+defer", &Config{Entries: 64, SingleIssuer: true, DeferTaskrun: true}},
		{"single-issuer+defer+regfd", &Config{Entries: 64, SingleIssuer: true, DeferTaskrun: true, RegisterRingFD: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := newRing(b, bc.cfg)
			cqes := make([]CQE, 1)
			b.ReportAllocs()
			start := r.EnterCount()
			for b.Loop() {
				if err := nopOnce(r, cqes); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(r.EnterCount()-start)/float64(b.N), "enters/op")
		})
	}
}

// BenchmarkRegisteredRingFD measures what IORING_REGISTER_RING_FDS saves
// per io_uring_enter the only honest way on a shared machine: two otherwise
// identical rings on one thread, NOP blocks alternated ABBA within one run,
// reported as thread CPU ns per NOP for each arm and their ratio
// (regfd/plain below 1 means the registered fd is cheaper). Thread CPU time
// (CLOCK_THREAD_CPUTIME_ID; the goroutine is locked to its thread) leaves out
// the time other processes hold the CPU. The saving is the fget/fput of the
// ring file: atomic in a multi-threaded process like any Go program.
func BenchmarkRegisteredRingFD(b *testing.B) {
	plain := newRing(b, &Config{Entries: 64, SingleIssuer: true, DeferTaskrun: true})
	reg := newRing(b, &Config{Entries: 64, SingleIssuer: true, DeferTaskrun: true, RegisterRingFD: true})
	cqes := make([]CQE, 1)
	const block = 256
	var spent [2]time.Duration // plain, regfd
	rings := [2]*Ring{plain, reg}
	nops := 0
	b.ReportAllocs()
	for b.Loop() {
		for k := range 2 {
			arm := (k + nops/block) % 2 // ABBA: alternate which arm goes first
			start := threadCPU(b)
			for range block {
				if err := nopOnce(rings[arm], cqes); err != nil {
					b.Fatal(err)
				}
			}
			spent[arm] += threadCPU(b) - start
		}
		nops += block
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(nops), "ns/nop-plain")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(nops), "ns/nop-regfd")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "regfd/plain")
}

// threadCPU returns the CPU time of the calling thread.
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

func BenchmarkNopBatch32(b *testing.B) {
	r := newRing(b, &Config{Entries: 64, SingleIssuer: true, DeferTaskrun: true, RegisterRingFD: true})
	cqes := make([]CQE, 32)
	b.ReportAllocs()
	for b.Loop() {
		for range 32 {
			r.GetSQE().PrepNop(1)
		}
		if _, err := r.SubmitAndWait(32, 0); err != nil {
			b.Fatal(err)
		}
		if r.PeekCQEs(cqes) != 32 {
			b.Fatal(errNoCQE)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/32, "ns/nop")
}

func BenchmarkEchoRoundTrip(b *testing.B) {
	e := newEcho(b, 64)
	b.ReportAllocs()
	start := e.r.EnterCount()
	for b.Loop() {
		if err := e.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(e.r.EnterCount()-start)/float64(b.N), "enters/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// TestZeroAllocs is the allocation budget of the hot path: submitting and
// reaping a NOP, and a full echo round trip, allocate nothing.
func TestZeroAllocs(t *testing.T) {
	t.Run("nop", func(t *testing.T) {
		r := newRing(t, &Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true})
		cqes := make([]CQE, 1)
		var err error
		allocs := testing.AllocsPerRun(200, func() {
			if e := nopOnce(r, cqes); e != nil {
				err = e
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if allocs != 0 {
			t.Errorf("nop submit+reap: %v allocs/op, want 0", allocs)
		}
	})
	t.Run("echo", func(t *testing.T) {
		e := newEcho(t, 64)
		var err error
		allocs := testing.AllocsPerRun(200, func() {
			if x := e.roundTrip(); x != nil {
				err = x
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if allocs != 0 {
			t.Errorf("echo round trip: %v allocs/op, want 0", allocs)
		}
	})
	t.Run("timeout wait", func(t *testing.T) {
		r := newRing(t, nil)
		allocs := testing.AllocsPerRun(20, func() {
			r.SubmitAndWait(1, 1000) // 1 µs: returns unix.ETIME
		})
		if allocs != 0 {
			t.Errorf("timed wait: %v allocs/op, want 0", allocs)
		}
	})
}

// BenchmarkPrepSend is the cost of preparing one SEND, including the check
// that the buffer lies in a MapAnon mapping (a lock-free binary search over
// the live mappings; the benchmark adds 64 of them, more than a loop
// usually has).
func BenchmarkPrepSend(b *testing.B) {
	for range 63 {
		offHeap(b, 4096)
	}
	buf := offHeap(b, 4096)
	var s SQE
	b.ReportAllocs()
	for b.Loop() {
		s.PrepSend(3, buf[:64], 0, 1)
	}
}

// BenchmarkQuietSendNop is what the engine's NOP ending each chain of
// quiet SENDs costs (engine: flush): a 64-byte SEND with MSG_DONTWAIT
// submitted and reaped in one enter on a DEFER_TASKRUN ring, alone and
// linked to a NOP with FlagCQESkipSuccess, which the enter then runs as
// task work and which posts nothing. Measured as BenchmarkRegisteredRingFD
// is: blocks alternated ABBA on one thread, thread CPU ns per send for
// each arm and their ratio. A goroutine reads the peer, so that no send is
// cut.
func BenchmarkQuietSendNop(b *testing.B) {
	r := newRing(b, &Config{Entries: 64, SingleIssuer: true, DeferTaskrun: true, RegisterRingFD: true})
	c, s := tcpPair(b)
	go func() {
		p := make([]byte, 64<<10)
		for {
			if n, err := unix.Read(c, p); n <= 0 || err != nil {
				return // the pair closed at cleanup
			}
		}
	}()
	msg := offHeap(b, 64)
	cqes := make([]CQE, 2)
	send := func(nop bool) {
		q := r.GetSQE()
		q.PrepSend(s, msg, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT|unix.MSG_WAITALL, 1)
		if nop {
			q.SetFlags(FlagIOLink)
			q = r.GetSQE()
			q.PrepNop(2)
			q.SetFlags(FlagCQESkipSuccess)
		}
		if _, err := r.SubmitAndWait(1, 0); err != nil {
			b.Fatal(err)
		}
		if n := r.PeekCQEs(cqes); n != 1 || cqes[0].UserData != 1 || cqes[0].Res != int32(len(msg)) {
			b.Fatalf("completions %+v, want the SEND's alone, whole", cqes[:n])
		}
	}
	const block = 256
	var spent [2]time.Duration // alone, with the NOP
	sends := 0
	b.ReportAllocs()
	for b.Loop() {
		for k := range 2 {
			arm := (k + sends/block) % 2
			start := threadCPU(b)
			for range block {
				send(arm == 1)
			}
			spent[arm] += threadCPU(b) - start
		}
		sends += block
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(sends), "ns/send")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(sends), "ns/send+nop")
	b.ReportMetric(float64(spent[1]-spent[0])/float64(sends), "ns/nop")
}

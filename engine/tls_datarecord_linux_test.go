package engine

import (
	"crypto/tls"
	"fmt"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// recordSink is the net.Conn under the benchmark's crypto/tls server:
// through the handshake it is the socket; after, with sink set, each Write
// is copied into buf, as the engine copies what crypto/tls writes into its
// send slab, and counted (bytes, records: crypto/tls writes one record per
// Write), never sent.
type recordSink struct {
	net.Conn
	sink           bool
	buf            []byte
	bytes, records int
}

func (s *recordSink) Write(p []byte) (int, error) {
	if !s.sink {
		return s.Conn.Write(p)
	}
	copy(s.buf, p)
	s.bytes += len(p)
	s.records++
	return len(p), nil
}

// sinkTLS returns a TLS 1.3 server connection whose handshake with a
// client on loopback is done, writing into a recordSink from then on,
// and its sink. Both connections are closed when b ends.
func sinkTLS(b *testing.B) (*tls.Conn, *recordSink) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	craw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	cc := tls.Client(craw, clientTLS(tls.VersionTLS13))
	b.Cleanup(func() { cc.Close() })
	raw, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { raw.Close() })
	done := make(chan error, 1)
	go func() { done <- cc.Handshake() }()
	s := &recordSink{Conn: raw, buf: make([]byte, 20<<10)}
	cfg := serverTLS()
	// The proxy's listeners keep crypto/tls's dynamic record sizing, which
	// ends after 128 KiB; the benchmark measures the steady state.
	cfg.DynamicRecordSizingDisabled = true
	sc := tls.Server(s, cfg)
	err = sc.Handshake()
	if err != nil {
		raw.Close() // the client's handshake, waiting for more, ends
	}
	if cerr := <-done; err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	s.sink = true
	return sc, s
}

// cpuTime is the CPU time (user and system) the process has used, in
// nanoseconds: on a machine other work shares, a figure the benchmark's
// waits for a CPU do not inflate, as they do ns/op.
func cpuTime() int64 {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkTLSDataFrameRecords measures three ways to encrypt the HTTP/2
// DATA frames (a 9-byte header, then a payload) that carry one received
// buffer of size bytes, with crypto/tls, whose records hold 16384 bytes of
// plaintext at most:
//
//   - split: frames of up to 16384 bytes, the header and the payload each
//     a Write, so a record each (what tlsConn.writev does with a payload
//     that does not fit in a record after its header: 16376 bytes or more);
//   - copy: frames of up to 16375 bytes, the header and payload copied
//     together into scratch and written at once (what tlsConn.writev does
//     with a payload that fits after its header);
//   - headroom: frames of up to 16375 bytes, each header written into the
//     9 bytes in front of its payload and both written at once, with no
//     copy (the payload's buffer would need room in front of it, which
//     the engine's receive buffers do not have; a later frame's header
//     goes over the end of the payload before it, already encrypted).
//
// A full buffer of 16384 bytes (the default ReadBufferSize) is two
// records whatever the way: its frame with its header is 16393 bytes.
// Besides the time it reports the process's CPU time (cpu-ns/op, less
// inflated than ns/op where other work shares the CPUs) and the bytes
// (wire-B/op) and records crypto/tls wrote per buffer: each record costs
// 22 bytes (TLS 1.3, AES-GCM) and a seal. The writes go into a buffer, as
// the engine copies them into its send slab, not to a socket.
//
//	go test -run '^$' -bench BenchmarkTLSDataFrameRecords -benchtime 3s -count 5 -cpu 2 ./engine/
func BenchmarkTLSDataFrameRecords(b *testing.B) {
	const hdr = 9
	for _, size := range []int{16375, 16384, 64 << 10} {
		for _, arm := range []string{"split", "copy", "headroom"} {
			b.Run(fmt.Sprintf("size=%d/%s", size, arm), func(b *testing.B) {
				c, s := sinkTLS(b)
				buf := make([]byte, hdr+size) // the payload at buf[hdr:], headroom before it
				h := make([]byte, hdr)
				scratch := make([]byte, 0, tlsGather)
				write := func(p []byte) {
					if _, err := c.Write(p); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				s.bytes, s.records = 0, 0
				cpu0 := cpuTime()
				for b.Loop() {
					p := buf[hdr:]
					switch arm {
					case "split":
						for len(p) > 0 {
							k := min(len(p), tlsGather)
							write(h)
							write(p[:k])
							p = p[k:]
						}
					case "copy":
						for len(p) > 0 {
							k := min(len(p), tlsGather-hdr)
							scratch = append(append(scratch[:0], h...), p[:k]...)
							write(scratch)
							p = p[k:]
						}
					case "headroom":
						for off := hdr; off < len(buf); {
							k := min(len(buf)-off, tlsGather-hdr)
							copy(buf[off-hdr:off], h)
							write(buf[off-hdr : off+k])
							off += k
						}
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(s.bytes)/float64(b.N), "wire-B/op")
				b.ReportMetric(float64(s.records)/float64(b.N), "records/op")
			})
		}
	}
}

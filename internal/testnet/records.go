package testnet

import (
	"net"
	"sync/atomic"
)

// RecordCounter is a net.Conn, under a TLS client, that counts the TLS
// records read through it (by their 5-byte headers).
type RecordCounter struct {
	net.Conn
	hdr     [5]byte
	got     int // bytes of hdr so far
	left    int // bytes of the record's body still to come
	records atomic.Int64
}

// Records is how many record headers have been read so far. Any goroutine.
func (r *RecordCounter) Records() int64 { return r.records.Load() }

// Read reads from the connection and counts the record headers read.
func (r *RecordCounter) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	for b := p[:n]; len(b) > 0; {
		if r.left > 0 {
			k := min(r.left, len(b))
			r.left, b = r.left-k, b[k:]
			continue
		}
		k := copy(r.hdr[r.got:], b)
		r.got, b = r.got+k, b[k:]
		if r.got == 5 {
			r.records.Add(1)
			r.got, r.left = 0, int(r.hdr[3])<<8|int(r.hdr[4])
		}
	}
	return n, err
}

package h2

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// pumpPieces is pump with each side's output read by the other in pieces
// of random sizes, through FeedTail; it checks the tails' bound.
func pumpPieces(t *testing.T, c *Client, s *Server, rnd *rand.Rand) {
	t.Helper()
	var ct, st []byte // the client's tail (of the server's bytes), the server's
	feed := func(f interface {
		FeedTail(*[]byte, []byte) error
	}, tail *[]byte, p []byte) {
		for len(p) > 0 {
			k := min(len(p), 1+rnd.IntN(64))
			if rnd.IntN(8) == 0 {
				k = min(len(p), 1+rnd.IntN(40000))
			}
			if err := f.FeedTail(tail, p[:k]); err != nil {
				t.Fatalf("FeedTail: %v", err)
			}
			if len(*tail) > FrameHeaderLen+MinMaxFrameSize {
				t.Fatalf("tail of %d bytes", len(*tail))
			}
			p = p[k:]
		}
	}
	for i := 0; ; i++ {
		if i > 100000 {
			t.Fatal("pump: no end")
		}
		p, q := c.Pending(), s.Pending()
		if len(p) == 0 && len(q) == 0 {
			return
		}
		if len(p) > 0 {
			p = bytes.Clone(p)
			c.Written(len(p))
			feed(s, &st, p)
		}
		if q = s.Pending(); len(q) > 0 {
			q = bytes.Clone(q)
			s.Written(len(q))
			feed(c, &ct, q)
		}
	}
}

// TestFeedTail: a Client and a Server exchanging 1 MiB bodies both ways,
// each reading the other's bytes in pieces that end anywhere (in the
// preface, a frame header, a frame), get the same streams as whole reads.
func TestFeedTail(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	ca, sa := newClientApp(), newEchoApp()
	c, s := NewClient(ca, nil), NewServer(sa, nil)
	pumpPieces(t, c, s, rnd)
	bodies := map[uint32][]byte{}
	for i := range 20 {
		body := pattern(1<<20 + i*1000)
		if i%2 == 1 {
			body = []byte("small")
		}
		id, err := ca.start(c, req("/echo"), body, nil)
		if err != nil {
			t.Fatal(err)
		}
		bodies[id] = body
	}
	pumpPieces(t, c, s, rnd)
	for id, body := range bodies {
		if st := ca.st[id]; !st.ended || st.reset != "" || !bytes.Equal(st.body, body) {
			t.Fatalf("stream %d: ended %v reset %q body %d of %d", id, st.ended, st.reset, len(st.body), len(body))
		}
	}
}

// TestFeedTailOversize: a frame header announcing more than we accept is
// refused on its 9 bytes; the tail does not wait for (and hold) its payload.
func TestFeedTailOversize(t *testing.T) {
	s := NewServer(&recorder{}, nil)
	var tail []byte
	if err := s.FeedTail(&tail, start()); err != nil {
		t.Fatal(err)
	}
	big := AppendFrameHeader(nil, FrameHeader{Length: 1 << 20, Type: FrameData, StreamID: 1})
	for i := range big[:8] {
		if err := s.FeedTail(&tail, big[i:i+1]); err != nil {
			t.Fatalf("byte %d of the header: %v", i, err)
		}
	}
	var e *Error
	if err := s.FeedTail(&tail, append(big[8:], make([]byte, 1000)...)); !errors.As(err, &e) || e.Code != FrameSizeError {
		t.Fatalf("oversize frame: %v, want FRAME_SIZE_ERROR", err)
	}
	if len(tail) != 0 {
		t.Fatalf("tail of %d bytes after the error", len(tail))
	}
}

func TestSniffPreface(t *testing.T) {
	for _, tc := range []struct {
		seen int
		data string
		want int
	}{
		{0, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", SniffComplete},
		{0, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00", SniffComplete},
		{0, "PRI", SniffPartial},
		{3, " * HTTP/2.0\r\n", SniffPartial},
		{3, " * HTTP/2.0\r\n\r\nSM\r\n\r\n", SniffComplete},
		{0, "GET / HTTP/1.1\r\n", SniffOther},
		{0, "PRX", SniffOther},
		{3, " * HTTP/1.1", SniffOther},
		{0, "", SniffPartial},
	} {
		if got := SniffPreface(tc.seen, []byte(tc.data)); got != tc.want {
			t.Errorf("SniffPreface(%d, %q) = %d, want %d", tc.seen, tc.data, got, tc.want)
		}
	}
}

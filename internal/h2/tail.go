package h2

import "errors"

// errStuck: the whole frame a tail held was not consumed, which Feed never
// does; feeding it again would loop.
var errStuck = errors.New("h2: a whole frame was not consumed")

// FeedTail is Feed for a caller whose reads end anywhere (an event loop's
// receive buffers): *tail holds the start of a frame (or of the client
// preface) an earlier read ended in, empty at first, and the caller keeps
// it between calls. FeedTail completes that frame from data and feeds it,
// feeds the whole frames of data straight from data, and copies data's
// incomplete end into *tail: a read is copied only for the part of the
// frame it ends in, and *tail holds at most one frame of the largest size
// we accept and its header. Data handed to the handler points into data or
// *tail, valid during the call. Connection goroutine.
func (s *Server) FeedTail(tail *[]byte, data []byte) error { return feedTail(s, tail, data) }

// FeedTail is Server.FeedTail for the server's frames. Connection
// goroutine.
func (c *Client) FeedTail(tail *[]byte, data []byte) error { return feedTail(c, tail, data) }

// feeder is a side of a connection, as feedTail feeds it.
type feeder interface {
	Feed(in []byte) (int, error)
	// want is how long a tail starting with t must be to be fed: the
	// client preface, a frame header, or the whole frame (only its
	// header when it is longer than we accept: Feed refuses it on that).
	want(t []byte) int
}

func feedTail(f feeder, tail *[]byte, data []byte) error {
	t := *tail
	for len(t) > 0 {
		if w := f.want(t); len(t) < w {
			if len(data) == 0 {
				*tail = t
				return nil
			}
			k := min(w-len(t), len(data))
			t, data = append(t, data[:k]...), data[k:]
			continue
		}
		// t is one whole frame (or the preface), which Feed takes whole.
		n, err := f.Feed(t)
		if err == nil && n != len(t) {
			err = errStuck
		}
		t = t[:0]
		if err != nil {
			*tail = t
			return err
		}
	}
	n, err := f.Feed(data)
	if err != nil {
		*tail = t
		return err
	}
	*tail = append(t, data[n:]...)
	return nil
}

func (s *Server) want(t []byte) int {
	if !s.prefaceDone {
		return len(ClientPreface)
	}
	return s.conn.want(t)
}

func (c *Client) want(t []byte) int { return c.conn.want(t) }

func (c *conn) want(t []byte) int {
	h, ok := ParseFrameHeader(t)
	if !ok || h.Length > c.cfg.MaxFrameSize {
		return FrameHeaderLen
	}
	return FrameHeaderLen + int(h.Length)
}

// Sniff results: how a connection's first bytes compare with the client
// preface.
const (
	SniffOther    = iota // a byte differs: not HTTP/2 with prior knowledge
	SniffPartial         // a prefix of the preface so far: read more
	SniffComplete        // the whole preface is there
)

// SniffPreface tells whether a connection that has sent seen bytes so far,
// each matching the client preface, and now data, is speaking HTTP/2 with
// prior knowledge: SniffOther at the first byte that differs,
// SniffPartial while data ends inside the preface, SniffComplete once it
// holds the rest of it (data may go on past it).
func SniffPreface(seen int, data []byte) int {
	n := min(len(ClientPreface)-seen, len(data))
	switch {
	case string(data[:n]) != ClientPreface[seen:seen+n]:
		return SniffOther
	case seen+n < len(ClientPreface):
		return SniffPartial
	}
	return SniffComplete
}

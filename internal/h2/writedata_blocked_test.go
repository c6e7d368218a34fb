package h2

import (
	"slices"
	"testing"
)

// TestWriteDataEmptyKeepsBlocked: a stream that a short WriteData left
// waiting for OnWritable still gets it after a WriteData or WriteDataTo
// of nothing (not the end) meanwhile: the empty write sends nothing and
// has no window to wait for, but the bytes the caller holds still do.
func TestWriteDataEmptyKeepsBlocked(t *testing.T) {
	body := pattern(100000)
	for _, direct := range []bool{false, true} {
		var c collector
		h := &recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) {
			s.WriteHeaders(id, 200, nil, false)
			if n, err := s.WriteDataTo(id, body, true, c.Writev); n != initialWindow || err != nil {
				t.Fatalf("n %d err %v", n, err)
			}
			var n int
			var err error
			if direct {
				n, err = s.WriteDataTo(id, nil, false, c.Writev)
			} else {
				n, err = s.WriteData(id, nil, false)
			}
			if n != 0 || err != nil {
				t.Fatalf("empty write: n %d err %v", n, err)
			}
		}}
		s, p := open(t, h, nil)
		feed(t, s, p.headers(1, true, get...))
		feed(t, s, cat(AppendWindowUpdate(nil, 0, 1000), AppendWindowUpdate(nil, 1, 1000)))
		if !slices.Contains(h.events, "writable 1") {
			t.Errorf("WriteDataTo %v: no OnWritable after the window opened: events %q", direct, h.events)
		}
	}
}

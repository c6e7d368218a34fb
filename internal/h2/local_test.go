package h2

import "testing"

// TestServerLocalGivesNoResetBack: a stream the handler marks Local (an
// error it answers itself) gives no early reset back when it ends: a
// client putting such a request between each two rapid resets meets
// MaxEarlyResets as one that only resets does; a stream answered without
// Local still gives one back.
func TestServerLocalGivesNoResetBack(t *testing.T) {
	for _, local := range []bool{true, false} {
		s, p := open(t, &recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) {
			if string(r.Path) == "/hold" {
				return
			}
			if local {
				s.Local(id)
			}
			s.WriteHeaders(id, 400, nil, true)
		}}, &Config{MaxEarlyResets: 50})
		for i := range 100 {
			id := uint32(4*i + 1)
			in := cat(p.headers(id, true, hold...), frame(FrameRSTStream, 0, id, u32(uint32(Cancel))...), p.headers(id+2, true, get...))
			code := feed(t, s, in)
			if local && i == 50 {
				if code != EnhanceYourCalm {
					t.Fatalf("local answers: rapid reset %d, past the limit: %v", i+1, code)
				}
				break
			}
			if code != noConnErr {
				t.Fatalf("local %v: rapid reset %d: %v", local, i+1, code)
			}
		}
	}
}

// TestServerLocalResetCounts: the handler's Reset of a stream it marked
// Local, before its response ended or sent DATA, counts as an early
// reset: past MaxEarlyResets the connection ends with the frame whose
// handler call reset it. A Reset of a stream not marked Local, or after
// the response's DATA, does not count.
func TestServerLocalResetCounts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		local   bool
		data    bool // the response sent DATA before the reset
		counted bool
	}{
		{"local", true, false, true},
		{"local after DATA", true, true, false},
		{"not local", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, p := open(t, &recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) {
				if tc.data {
					s.WriteHeaders(id, 200, nil, false)
					s.WriteData(id, []byte("x"), false)
				}
				if tc.local {
					s.Local(id)
				}
				s.Reset(id, ProtocolError)
			}}, &Config{MaxEarlyResets: 50})
			for i := range 100 {
				code := feed(t, s, p.headers(uint32(2*i+1), true, get...))
				if tc.counted && i == 50 {
					if code != EnhanceYourCalm {
						t.Fatalf("reset %d, past the limit: %v", i+1, code)
					}
					return
				}
				if code != noConnErr {
					t.Fatalf("reset %d: %v", i+1, code)
				}
				outFrames(t, s, p.dec)
			}
			if tc.counted {
				t.Fatal("no GOAWAY past the limit")
			}
		})
	}
}

package h2

import (
	"fmt"
	"testing"

	"github.com/spindlenet/spindle/internal/hpack"
)

// TestPseudoNeverIndexedKept: pseudo-header fields a client sends as
// never-indexed literals are so in the Server's Request.NeverIndexed, and
// a Client's Request sends those of r.NeverIndexed never-indexed again
// (RFC 7541 6.2.3: an intermediary keeps the representation), the
// others as before; the fields arrive whole.
func TestPseudoNeverIndexedKept(t *testing.T) {
	for _, ni := range []Pseudo{0, PseudoPath, PseudoAuthority | PseudoPath, PseudoMethod | PseudoScheme | PseudoAuthority | PseudoPath} {
		var got []Request
		s := NewServer(&recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) {
			got = append(got, Request{Method: r.Method, Authority: r.Authority, Path: r.Path, NeverIndexed: r.NeverIndexed})
			s.WriteHeaders(id, 200, nil, true)
		}}, nil)
		c := NewClient(newClientApp(), nil)
		pump(t, c, s)
		r := &Request{Method: []byte("GET"), Scheme: []byte("https"), Authority: []byte("a.example"), Path: []byte("/secret?token=t0k3n"), NeverIndexed: ni}
		for range 2 { // the second time, what was indexed is in the table
			if _, err := c.Request(r, true); err != nil {
				t.Fatal(err)
			}
			pump(t, c, s)
		}
		if len(got) != 2 {
			t.Fatalf("NeverIndexed %04b: %d requests arrived, want 2", ni, len(got))
		}
		for i, g := range got {
			if string(g.Method) != "GET" || string(g.Authority) != "a.example" || string(g.Path) != "/secret?token=t0k3n" || g.NeverIndexed != ni {
				t.Errorf("request %d: %s %s %s never-indexed %04b, want GET a.example /secret?token=t0k3n %04b", i+1, g.Method, g.Authority, g.Path, g.NeverIndexed, ni)
			}
		}
	}

	// A Server alone: the peer's encoder marks :authority never-indexed.
	var ni Pseudo
	s, p := open(t, &recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) { ni = r.NeverIndexed }}, nil)
	b := p.enc.StartBlock(nil)
	for _, f := range []hpack.Field{
		{Name: []byte(":method"), Value: []byte("GET")}, {Name: []byte(":scheme"), Value: []byte("http")},
		{Name: []byte(":authority"), Value: []byte("x"), Sensitive: true}, {Name: []byte(":path"), Value: []byte("/")},
	} {
		b = p.enc.AppendField(b, f)
	}
	if code := feed(t, s, frame(FrameHeaders, FlagEndHeaders|FlagEndStream, 1, b...)); code != noConnErr || ni != PseudoAuthority {
		t.Fatalf("%v, never-indexed %04b, want %04b", code, ni, PseudoAuthority)
	}
}

// TestStatusNeverIndexedKept: a :status a server sends as a never-indexed
// literal is so in the Client's Response.NeverIndexed, interim and final,
// and a Server's WriteResponse sends it never-indexed again where
// r.NeverIndexed has PseudoStatus (RFC 7541 6.2.3: an intermediary keeps
// the representation), indexed as before where not; regular fields keep
// theirs.
func TestStatusNeverIndexedKept(t *testing.T) {
	for _, ni := range []Pseudo{0, PseudoStatus} {
		type got struct {
			status int
			ni     Pseudo
			secret bool // x-secret arrived never-indexed
		}
		var gots []got
		a := newClientApp()
		a.onResponse = func(r *Response) {
			g := got{status: r.Status, ni: r.NeverIndexed}
			for _, f := range r.Fields {
				g.secret = g.secret || string(f.Name) == "x-secret" && f.Sensitive
			}
			gots = append(gots, g)
		}
		fs := []hpack.Field{{Name: []byte("x-secret"), Value: []byte("s3cr3t"), Sensitive: true}}
		s := NewServer(&recorder{onRequest: func(s *Server, id uint32, r *Request, end bool) {
			s.WriteResponse(id, &Response{Status: 103, Fields: fs, NeverIndexed: ni}, false)
			s.WriteResponse(id, &Response{Status: 200, Fields: fs, NeverIndexed: ni}, true)
		}}, nil)
		c := NewClient(a, nil)
		pump(t, c, s)
		r := &Request{Method: []byte("GET"), Scheme: []byte("https"), Authority: []byte("a.example"), Path: []byte("/")}
		for range 2 { // the second time, what was indexed is in the table
			if _, err := c.Request(r, true); err != nil {
				t.Fatal(err)
			}
			pump(t, c, s)
		}
		want := []got{{103, ni, true}, {200, ni, true}, {103, ni, true}, {200, ni, true}}
		if fmt.Sprint(gots) != fmt.Sprint(want) {
			t.Errorf("NeverIndexed %05b: responses (status, never-indexed, x-secret never-indexed) %v, want %v", ni, gots, want)
		}
	}

	// A Client alone: the peer's encoder marks :status never-indexed.
	c, a, p := openClient(t, nil)
	id, err := c.Request(&Request{Method: []byte("GET"), Scheme: []byte("http"), Authority: []byte("x"), Path: []byte("/")}, true)
	if err != nil {
		t.Fatal(err)
	}
	var ni Pseudo
	a.onResponse = func(r *Response) { ni = r.NeverIndexed }
	b := p.enc.AppendField(p.enc.StartBlock(nil), hpack.Field{Name: []byte(":status"), Value: []byte("200"), Sensitive: true})
	if code := feed(t, c, frame(FrameHeaders, FlagEndHeaders|FlagEndStream, id, b...)); code != noConnErr || ni != PseudoStatus {
		t.Fatalf("%v, never-indexed %05b, want %05b", code, ni, PseudoStatus)
	}
}

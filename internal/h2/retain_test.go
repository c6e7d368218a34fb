package h2

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/internal/hpack"
)

// kept names the header decoding buffers c keeps beyond keepBuf bytes or
// keepFields fields (fields, the side's request or response list), with
// their sizes; "" if none.
func kept(c *conn, fields []hpack.Field) string {
	var over []string
	for _, b := range []struct {
		name string
		n    int // bytes
		big  bool
	}{
		{"hbuf", cap(c.hbuf), cap(c.hbuf) > keepBuf},
		{"fbuf", cap(c.fbuf), cap(c.fbuf) > keepBuf},
		{"spans", cap(c.spans) * int(reflect.TypeFor[span]().Size()), cap(c.spans) > keepFields},
		{"tfields", cap(c.tfields) * int(reflect.TypeFor[hpack.Field]().Size()), cap(c.tfields) > keepFields},
		{"fields", cap(fields) * int(reflect.TypeFor[hpack.Field]().Size()), cap(fields) > keepFields},
		{"blk", cap(c.blk), cap(c.blk) > keepBuf},
	} {
		if b.big {
			over = append(over, fmt.Sprintf("%s %d bytes", b.name, b.n))
		}
	}
	return strings.Join(over, ", ")
}

// TestLargeHeadersNotRetained: header sections near MaxHeaderListSize
// made of little HPACK (after its first field each is an index into the
// dynamic table: 1900 one-letter fields in about 2 KB, or 20 fields of
// 3000 bytes in about 3 KB) grow the buffers they are decoded into to
// their size: 280 KB kept by a connection that sent a 2 KB request and
// its 2 KB trailers (the field lists 56 bytes a field, the spans 20).
// Once the Feed that used them returned, a connection keeps at most
// keepBuf bytes and keepFields fields in each, on a Server (requests and
// trailers, a 6 KB block in CONTINUATIONs, which a Feed that ends before
// its end keeps; a large response head we send) and a Client (a response
// and its trailers); the small sections of steady traffic cost no
// allocation (TestServerAllocs, TestClientAllocs).
func TestLargeHeadersNotRetained(t *testing.T) {
	var many, long []string
	for range 1900 {
		many = append(many, "a", "")
	}
	for range 20 {
		long = append(long, "b", strings.Repeat("x", 3000))
	}
	t.Run("server", func(t *testing.T) {
		h := &recorder{}
		s, p := open(t, h, nil)
		in := cat(p.headers(1, false, kvs(get, many...)...), p.headers(1, true, many...), p.headers(3, true, kvs(get, long...)...))
		// 6 KB in CONTINUATIONs of 100 bytes, gathered in hbuf.
		var wide []string
		for i := range 4 {
			wide = append(wide, fmt.Sprint("w", i), strings.Repeat("z", 1500))
		}
		blk := p.block(kvs(get, wide...)...)
		in = cat(in, frame(FrameHeaders, 0, 5, blk[:100]...))
		for blk = blk[100:]; len(blk) > 100; blk = blk[100:] {
			in = cat(in, frame(FrameContinuation, 0, 5, blk[:100]...))
		}
		in = cat(in, frame(FrameContinuation, FlagEndHeaders, 5, blk...))
		if len(in) > 16000 {
			t.Fatalf("input of %d bytes", len(in))
		}
		if code := feed(t, s, in); code != noConnErr || len(h.events) != 4 {
			t.Fatalf("code %v, events %d", code, len(h.events))
		}
		if k := kept(&s.conn, s.req.Fields); k != "" {
			t.Fatalf("kept %s", k)
		}
		// A block larger than keepBuf whose Feed ends before its last
		// CONTINUATION keeps what it gathered.
		blk = p.block(kvs(get, wide...)...)
		in = frame(FrameHeaders, FlagEndStream, 7, blk[:5000]...)
		if code := feed(t, s, in); code != noConnErr || cap(s.hbuf) <= keepBuf {
			t.Fatalf("code %v, hbuf %d", code, cap(s.hbuf))
		}
		if code := feed(t, s, frame(FrameContinuation, FlagEndHeaders, 7, blk[5000:]...)); code != noConnErr {
			t.Fatalf("code %v", code)
		}
		if e := h.events[len(h.events)-1]; !strings.HasPrefix(e, "req 7 GET") || !strings.HasSuffix(e, " w3="+strings.Repeat("z", 1500)+" end") {
			t.Fatalf("stream 7: %.60q", e)
		}
		// A large response head we send.
		if err := s.WriteHeaders(7, 200, []hpack.Field{{Name: []byte("b"), Value: []byte(strings.Repeat("x", 5000))}}, true); err != nil {
			t.Fatal(err)
		}
		if k := kept(&s.conn, s.req.Fields); k != "" {
			t.Fatalf("kept %s", k)
		}
	})
	t.Run("client", func(t *testing.T) {
		c, a, p := openClient(t, nil)
		a.start(c, req("/"), nil, nil)
		a.start(c, req("/"), nil, nil)
		in := cat(p.headers(1, false, append([]string{":status", "200"}, many...)...), p.headers(1, true, many...),
			p.headers(3, true, append([]string{":status", "200"}, long...)...))
		if code := feed(t, c, in); code != noConnErr || len(a.st[1].trailers) != 1900 || len(a.st[3].fields) != 20 {
			t.Fatalf("code %v, streams %+v %+v", code, a.st[1], a.st[3])
		}
		if k := kept(&c.conn, c.resp.Fields); k != "" {
			t.Fatalf("kept %s", k)
		}
	})
}

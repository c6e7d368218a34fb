package h1_test

import (
	"fmt"

	"github.com/spindlenet/spindle/internal/h1"
)

// A proxy parses a request head, writes it on without hop-by-hop fields and
// then passes the body through, chunk-size lines and all, until it ends.
func Example() {
	in := []byte("POST /upload HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive, X-Hop\r\n" +
		"X-Hop: 1\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"5\r\nhello\r\n0\r\n\r\nGET /next HTTP/1.1\r\n")
	var req h1.Request
	n, err := req.Parse(in, h1.Limits{})
	if err != nil || n == 0 {
		fmt.Println("bad or incomplete:", err)
		return
	}
	out := req.AppendHead(nil, req.HopByHop)
	fmt.Printf("%q\n", out)

	var body h1.Body
	body.Reset(req.Framing, req.ContentLength)
	m, done, err := body.Next(in[n:])
	fmt.Printf("body %q done=%v err=%v\n", in[n:n+m], done, err)
	// Output:
	// "POST /upload HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
	// body "5\r\nhello\r\n0\r\n\r\n" done=true err=<nil>
}

// A gateway to a protocol with its own framing (HTTP/2's DATA and HEADERS)
// takes a chunked body's data and trailer section out of its bytes as they
// arrive, in the pass that checks them.
func ExampleBody_NextSpan() {
	var body h1.Body
	body.Reset(h1.Chunked, 0)
	for _, p := range [][]byte{[]byte("5;ext=1\r\nhel"), []byte("lo\r\n3\r\n wo\r\n0\r\nX-T: 1\r\n\r\nNEXT")} {
		for len(p) > 0 {
			s, err := body.NextSpan(p)
			if err != nil {
				fmt.Println(err)
				return
			}
			piece := p[s.Skip : s.Skip+s.Len]
			switch {
			case s.Trailer:
				fmt.Printf("trailer %q\n", piece)
			case s.Len > 0:
				fmt.Printf("data %q\n", piece)
			}
			if s.Done {
				fmt.Printf("done, %q follows\n", p[s.Skip+s.Len:])
				return
			}
			p = p[s.Skip+s.Len:]
		}
	}
	// Output:
	// data "hel"
	// data "lo"
	// data " wo"
	// trailer "X-T: 1\r\n"
	// done, "NEXT" follows
}

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

package h2_test

import (
	"fmt"

	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// hello answers every request with "hello".
type hello struct{}

func (hello) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	fmt.Printf("request %d: %s %s\n", id, r.Method, r.Path)
	s.WriteHeaders(id, 200, nil, false)
	s.WriteData(id, []byte("hello"), true)
}
func (hello) OnData(s *h2.Server, id uint32, p []byte, end bool) { s.Consumed(id, len(p)) }
func (hello) OnTrailers(*h2.Server, uint32, []hpack.Field)       {}
func (hello) OnReset(*h2.Server, uint32, h2.ErrCode)             {}
func (hello) OnWritable(*h2.Server, uint32)                      {}
func (hello) OnGoAway(*h2.Server, h2.ErrCode, []byte)            {}

// A connection's loop: feed what was read, keep the unconsumed tail, write
// what is pending.
func Example() {
	// What a client sends: the preface, SETTINGS, and a GET.
	enc := hpack.NewEncoder()
	block := enc.StartBlock(nil)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "example.com"}, {":path", "/"}} {
		block = enc.AppendField(block, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
	}
	in := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...)
	in = h2.AppendHeaders(in, 1, block, true, h2.MinMaxFrameSize)

	s := h2.NewServer(hello{}, nil)
	n, err := s.Feed(in[:30]) // an incomplete frame waits for more
	fmt.Println(n, err)
	in = in[n:]
	n, err = s.Feed(in)
	fmt.Println(n == len(in), err)

	out := s.Pending() // conn.Write(out)
	for len(out) > 0 {
		f, n, _ := h2.ParseFrame(out, h2.MaxMaxFrameSize)
		fmt.Println(f.Type, f.StreamID, f.Flags)
		out = out[n:]
	}
	s.Written(len(s.Pending()))
	// Output:
	// 24 <nil>
	// request 1: GET /
	// true <nil>
	// SETTINGS 0 0
	// WINDOW_UPDATE 0 0
	// SETTINGS 0 1
	// HEADERS 1 4
	// DATA 1 1
}

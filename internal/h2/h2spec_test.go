package h2

import (
	"net"
	"os"
	"os/exec"
	"testing"

	"github.com/spindlenet/spindle/internal/hpack"
)

// okApp answers each request with 200 "ok, h2spec" once it has ended, as the
// send window allows.
type okApp struct{ left map[uint32][]byte }

func (a okApp) OnRequest(s *Server, id uint32, r *Request, end bool) {
	if end {
		a.answer(s, id)
	}
}

func (a okApp) OnData(s *Server, id uint32, p []byte, end bool) {
	s.Consumed(id, len(p))
	if end {
		a.answer(s, id)
	}
}

func (a okApp) answer(s *Server, id uint32) {
	s.WriteHeaders(id, 200, nil, false)
	a.left[id] = []byte("ok, h2spec") // 5 bytes or more: 6.9.2/2 runs
	a.OnWritable(s, id)
}

func (a okApp) OnWritable(s *Server, id uint32) {
	n, err := s.WriteData(id, a.left[id], true)
	if a.left[id] = a.left[id][n:]; err != nil || len(a.left[id]) == 0 {
		delete(a.left, id)
	}
}

func (a okApp) OnTrailers(s *Server, id uint32, fields []hpack.Field) { a.answer(s, id) }
func (a okApp) OnReset(s *Server, id uint32, code ErrCode)            { delete(a.left, id) }
func (okApp) OnGoAway(*Server, ErrCode, []byte)                       {}

// TestH2Spec runs the h2spec conformance suite (strict cases included)
// against a Server on loopback, when H2SPEC names its binary.
func TestH2Spec(t *testing.T) {
	bin := os.Getenv("H2SPEC")
	if bin == "" {
		t.Skip("H2SPEC not set: the path of an h2spec binary (scripts/test.sh builds the one bench/peers/go.mod pins: cd bench/peers && go build github.com/summerwind/h2spec/cmd/h2spec)")
	}
	addr, stop := listen(t, func(net.Conn) (Handler, func(error)) {
		return okApp{left: map[uint32][]byte{}}, nil
	})
	defer stop()
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command(bin, "-h", host, "-p", port, "--strict", "-o", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("h2spec: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("%s", out)
	}
}

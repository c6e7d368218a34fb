package h2

import (
	"testing"

	"github.com/spindlenet/spindle/internal/h1"
)

// TestConnSpecific: the connection-specific fields an HTTP/2 message
// may not have (RFC 9113 8.2.2) are HTTP/1.1's (h1.ConnectionFields)
// and transfer-encoding, te but with the value "trailers" (any case);
// without an allocation.
func TestConnSpecific(t *testing.T) {
	for _, f := range h1.ConnectionFields {
		if !connSpecific([]byte(f), []byte("x")) {
			t.Errorf("%s: x passed", f)
		}
	}
	for _, tc := range []struct {
		name, value string
		want        bool
	}{
		{"transfer-encoding", "chunked", true}, {"te", "trailers", false}, {"te", "Trailers", false},
		{"te", "gzip", true}, {"te", "trailers, gzip", true}, {"te", "", true},
		{"x-te", "gzip", false}, {"host", "x", false}, {"trailer", "x-sum", false}, {"connectio", "x", false},
	} {
		if got := connSpecific([]byte(tc.name), []byte(tc.value)); got != tc.want {
			t.Errorf("connSpecific(%q, %q) = %v, want %v", tc.name, tc.value, got, tc.want)
		}
	}
	name, value := []byte("te"), []byte("trailers")
	if n := testing.AllocsPerRun(100, func() { connSpecific(name, value) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

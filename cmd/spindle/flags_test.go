package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/bench"
)

// TestBenchClientRefusesDefaults: bench client's -payload and -warmup are
// measured as given or refused before connecting. The load generator takes
// 0 for its default, so -payload 0 measured 128-byte payloads and
// -warmup 0 warmed up for 200 ms, the command saying nothing of either;
// -payload 1 failed only in the generator, after the flags.
func TestBenchClientRefusesDefaults(t *testing.T) {
	for _, tc := range []struct {
		flag, value string
	}{
		{"-payload", "0"},
		{"-payload", "1"},
		{"-payload", strconv.Itoa(bench.MaxPayload + 1)},
		{"-warmup", "0s"},
	} {
		// Nothing listens on port 1: a run that gets past the flags
		// fails to connect.
		stderr := wantRefusal(t, spindleCmd("bench", "client", "-addr", "127.0.0.1:1", "-duration", "100ms", tc.flag, tc.value))
		if !strings.Contains(stderr, tc.flag) || strings.Contains(stderr, "connect") {
			t.Errorf("bench client %s %s: stderr %q; want a refusal naming %s, before connecting", tc.flag, tc.value, stderr, tc.flag)
		}
	}
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestMeasureAlternating(t *testing.T) {
	startFails := &startError{errors.New("no such program")}
	for _, tc := range []struct {
		name string
		fail map[string]error // "arm point rep" → error
		want string           // the calls, then the outcome
	}{
		{"arms alternate within each point and repetition", nil,
			"a00 b00 c00 a10 b10 c10 a01 b01 c01 a11 b11 c11 ok"},
		{"an arm that cannot start in the first round is skipped", map[string]error{"b00": startFails},
			"a00 b00 c00 a10 c10 a01 c01 a11 c11 ok; skipped b: no such program; lost 4"},
		{"a start error later fails the run", map[string]error{"b01": startFails},
			"a00 b00 c00 a10 b10 c10 a01 b01 error: no such program"},
		{"any other error fails the run", map[string]error{"c00": errors.New("crashed")},
			"a00 b00 c00 error: crashed"},
		{"no arm can run", map[string]error{"a00": startFails, "b00": startFails, "c00": startFails},
			"a00 b00 c00 error: bench: no test arm can run; skipped a: no such program; skipped b: no such program; skipped c: no such program; lost 4; lost 4; lost 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arms := []ArmInfo{{Name: "a"}, {Name: "b"}, {Name: "c"}}
			var calls, tail []string
			var notes []string
			err := measureAlternating(context.Background(), "test", arms, &notes, io.Discard, 2, 2, func(i, point, rep int) error {
				call := fmt.Sprintf("%s%d%d", arms[i].Name, point, rep-1)
				calls = append(calls, call)
				return tc.fail[call]
			}, func(n int) { tail = append(tail, fmt.Sprintf("lost %d", n)) })
			out := "ok"
			if err != nil {
				out = "error: " + err.Error()
			}
			for _, a := range arms {
				if a.Skipped != "" {
					out += fmt.Sprintf("; skipped %s: %s", a.Name, a.Skipped)
				}
			}
			if len(tail) > 0 {
				out += "; " + strings.Join(tail, "; ")
			}
			if got := strings.Join(append(calls, out), " "); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if len(notes) != strings.Count(out, "skipped") {
				t.Fatalf("notes %q", notes)
			}
		})
	}
}

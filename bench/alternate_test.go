package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
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
		{"arms alternate within each point, in the given order in repetition 1 and reversed in 2", nil,
			"a00 b00 c00 a10 b10 c10 c01 b01 a01 c11 b11 a11 ok"},
		{"an arm that cannot start in the first round is skipped", map[string]error{"b00": startFails},
			"a00 b00 c00 a10 c10 c01 a01 c11 a11 ok; skipped b: no such program; lost 4"},
		{"a start error later fails the run", map[string]error{"b01": startFails},
			"a00 b00 c00 a10 b10 c10 c01 b01 error: no such program"},
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

// TestArmOrder: the arms' order is the given one in odd repetitions and
// reversed in even ones, so that over each pair of repetitions every arm's
// two positions add up to the same (a linear drift adds the same to each
// arm's sum).
func TestArmOrder(t *testing.T) {
	for _, tc := range []struct {
		n, rep int
		want   []int
	}{
		{3, 1, []int{0, 1, 2}},
		{3, 2, []int{2, 1, 0}},
		{3, 3, []int{0, 1, 2}},
		{3, 4, []int{2, 1, 0}},
		{1, 2, []int{0}},
		{0, 1, []int{}},
	} {
		if got := armOrder(tc.n, tc.rep); !slices.Equal(got, tc.want) {
			t.Errorf("armOrder(%d, %d) = %v, want %v", tc.n, tc.rep, got, tc.want)
		}
	}
	for n := 1; n <= 6; n++ {
		for rep := 1; rep <= 5; rep += 2 {
			pos := make([]int, n)
			for _, r := range []int{rep, rep + 1} {
				for p, i := range armOrder(n, r) {
					pos[i] += p
				}
			}
			for i := range pos {
				if pos[i] != n-1 {
					t.Errorf("%d arms, reps %d and %d: arm %d at positions adding to %d, want %d", n, rep, rep+1, i, pos[i], n-1)
				}
			}
		}
	}
}

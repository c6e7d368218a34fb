package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// abRes is a measured A/B result of arm at repetition rep: cpu µs per
// request, with replies.
func abRes(arm string, rep int, cpu float64) ABResult {
	return ABResult{Arm: arm, Rep: rep, Requests: 1000, ServerUSPerReq: cpu}
}

// abFailed is a failed A/B measurement.
func abFailed(arm string, rep int) ABResult {
	return ABResult{Arm: arm, Rep: rep, Error: "bench: server exit: signal: killed"}
}

func abArms(names ...string) []ABArm {
	var arms []ABArm
	for _, n := range names {
		arms = append(arms, ABArm{Name: n, Command: []string{"/bin/" + n}})
	}
	return arms
}

// TestABRatiosPairByRepetition: an arm's CPU per request is divided by the
// base's of the same repetition, whatever the order within it (reversed
// in even ones), and a repetition whose measurement of the base or of the
// arm failed, or got no replies, drops that pair alone: pairing the
// measured results by their place in each arm's list would pair base's
// rep 3 with x's rep 2 (20 ÷ 10) after base's rep 2 failed.
func TestABRatiosPairByRepetition(t *testing.T) {
	results := []ABResult{
		abRes("base", 1, 10), abRes("x", 1, 9), abRes("y", 1, 12),
		abRes("y", 2, 30), abRes("x", 2, 20), abFailed("base", 2),
		abRes("base", 3, 10), abFailed("x", 3), abRes("y", 3, 5),
		abRes("y", 4, 11), abRes("x", 4, 8), abRes("base", 4, 10),
		abRes("base", 5, 20), {Arm: "x", Rep: 5}, abRes("y", 5, 10),
		abRes("y", 6, 26), abRes("x", 6, 22), abRes("base", 6, 20),
	}
	got := abRatios(abArms("base", "x", "y"), results)
	if len(got) != 2 || got[0].Arm != "x" || got[1].Arm != "y" || got[0].Base != "base" {
		t.Fatalf("ratios %+v, want x then y against base", got)
	}
	x, y := got[0], got[1]
	wantX := []ABRepRatio{{1, 0.9}, {4, 0.8}, {6, 1.1}}
	if !slices.Equal(x.ByRep, wantX) {
		t.Errorf("x by repetition %v, want %v (reps 2, 3 and 5 lost: base failed, x failed, x had no replies)", x.ByRep, wantX)
	}
	if x.Pairs != 3 || x.AtMost1 != 2 || x.ServerUSPerReq != (Spread{Median: 0.9, Min: 0.8, Max: 1.1}) {
		t.Errorf("x: %d pairs, %d at or below 1, %+v; want 3, 2, 0.9 (0.8–1.1)", x.Pairs, x.AtMost1, x.ServerUSPerReq)
	}
	wantY := []ABRepRatio{{1, 1.2}, {3, 0.5}, {4, 1.1}, {5, 0.5}, {6, 1.3}}
	if !slices.Equal(y.ByRep, wantY) {
		t.Errorf("y by repetition %v, want %v (rep 2 lost with the base: y measured, but nothing to pair it with)", y.ByRep, wantY)
	}
	if y.Pairs != 5 || y.AtMost1 != 2 || y.ServerUSPerReq != (Spread{Median: 1.1, Min: 0.5, Max: 1.3}) {
		t.Errorf("y: %d pairs, %d at or below 1, %+v; want 5, 2, 1.1 (0.5–1.3)", y.Pairs, y.AtMost1, y.ServerUSPerReq)
	}
}

// TestABRatiosArmNeverMeasured: an arm with no measured repetition still
// has its row, with no pairs, in the arms' order.
func TestABRatiosArmNeverMeasured(t *testing.T) {
	got := abRatios(abArms("base", "x", "y"), []ABResult{abRes("base", 1, 10), abFailed("x", 1), abRes("y", 1, 5)})
	if len(got) != 2 || got[0].Arm != "x" || got[0].Pairs != 0 || got[0].ByRep != nil || got[1].Arm != "y" || got[1].Pairs != 1 {
		t.Errorf("ratios %+v, want x with no pairs, then y with one", got)
	}
}

// TestABSummary: an arm's spreads are over its measured repetitions (a
// failed one counted apart, one without replies in neither), the median
// of an even count the mean of the middle two, the unanswered summed.
func TestABSummary(t *testing.T) {
	results := []ABResult{
		abRes("base", 1, 4), abRes("x", 1, 1),
		abRes("x", 2, 3), abRes("base", 2, 8),
		abRes("base", 3, 6), abFailed("x", 3),
		{Arm: "x", Rep: 4, Unanswered: 7}, abRes("base", 4, 2),
	}
	results[2].Unanswered, results[2].WaitsPerReq, results[1].WaitsPerReq = 2, 0.5, 1.5
	rows := abSummary(abArms("base", "x"), results)
	if len(rows) != 2 || rows[0].Arm != "base" || rows[1].Arm != "x" {
		t.Fatalf("rows %+v, want base then x", rows)
	}
	b, x := rows[0], rows[1]
	if b.Measured != 4 || b.Failed != 0 || b.ServerUSPerReq != (Spread{Median: 5, Min: 2, Max: 8}) {
		t.Errorf("base: measured %d, failed %d, %+v; want 4, 0, 5 (2–8)", b.Measured, b.Failed, b.ServerUSPerReq)
	}
	if x.Measured != 2 || x.Failed != 1 || x.ServerUSPerReq != (Spread{Median: 2, Min: 1, Max: 3}) || x.Unanswered != 9 {
		t.Errorf("x: measured %d, failed %d, %+v, unanswered %d; want 2, 1, 2 (1–3), 9", x.Measured, x.Failed, x.ServerUSPerReq, x.Unanswered)
	}
	if x.WaitsPerReq != (Spread{Median: 1, Min: 0.5, Max: 1.5}) {
		t.Errorf("x waits %+v, want 1 (0.5–1.5)", x.WaitsPerReq)
	}
}

// TestABTable: the table has a row per arm, the base's without a ratio,
// another's with its paired median (min–max) and k of n at or below 1.
func TestABTable(t *testing.T) {
	arms := abArms("base", "x")
	results := []ABResult{abRes("base", 1, 10), abRes("x", 1, 9), abRes("x", 2, 12), abRes("base", 2, 10)}
	rep := &ABReport{Arms: arms, Config: ABSettings{Reps: 2}, Results: results, Summary: abSummary(arms, results), Ratios: abRatios(arms, results)}
	var b strings.Builder
	WriteABTable(&b, rep)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "÷ base, paired") {
		t.Fatalf("table:\n%s\nwant a header naming the base, a rule and two rows", b.String())
	}
	if !strings.HasPrefix(lines[2], "| base | 2 of 2 | 10.00 |") || !strings.HasSuffix(lines[2], "| — | — |") {
		t.Errorf("base row %q", lines[2])
	}
	if !strings.HasPrefix(lines[3], "| x | 2 of 2 | 10.50 (9.00–12.00) |") || !strings.HasSuffix(lines[3], "| 1.050 (0.900–1.200) | 1 of 2 |") {
		t.Errorf("x row %q", lines[3])
	}
}

// TestParseABArm: NAME=COMMAND ARGS..., split at white space; no =, no
// name, a name of two words or no command are refused.
func TestParseABArm(t *testing.T) {
	a, err := ParseABArm("base=/tmp/spindle-base  bench server -arm uring")
	if err != nil || a.Name != "base" || !slices.Equal(a.Command, []string{"/tmp/spindle-base", "bench", "server", "-arm", "uring"}) {
		t.Errorf("got %+v, %v", a, err)
	}
	a, err = ParseABArm("c=/tmp/cecho -arm c-liburing -x=1")
	if err != nil || a.Name != "c" || !slices.Equal(a.Command, []string{"/tmp/cecho", "-arm", "c-liburing", "-x=1"}) {
		t.Errorf("an = in the command: got %+v, %v", a, err)
	}
	for _, s := range []string{"/tmp/spindle bench server", "=/tmp/spindle", "a b=/tmp/spindle", "base=", "base=  "} {
		if a, err := ParseABArm(s); err == nil {
			t.Errorf("%q: %+v, want an error", s, a)
		}
	}
}

// TestCheckABArms: two arms at least, each name once.
func TestCheckABArms(t *testing.T) {
	if err := CheckABArms(abArms("base", "x")); err != nil {
		t.Error(err)
	}
	for _, arms := range [][]ABArm{nil, abArms("base"), abArms("base", "x", "base")} {
		if err := CheckABArms(arms); err == nil {
			t.Errorf("%v: no error", arms)
		}
	}
}

// TestABServerArgv: the harness appends the listen address, the server
// CPUs and -control to an arm's command, nothing else (a server of
// another build may not know a newer flag).
func TestABServerArgv(t *testing.T) {
	c := ABConfig{ServerCPUs: []int{0, 2}}
	a := ABArm{Name: "base", Command: []string{"/tmp/s", "bench", "server", "-arm", "uring"}}
	want := []string{"/tmp/s", "bench", "server", "-arm", "uring", "-listen", "127.0.0.1:0", "-cpus", "0,2", "-control"}
	if got := c.argv(a); !slices.Equal(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
	if len(a.Command) != 5 {
		t.Errorf("the arm's command grew to %q", a.Command)
	}
}

// TestABTableArmNeverMeasured: an arm measured in no repetition (each
// window without replies) shows no figures, not medians of 0.
func TestABTableArmNeverMeasured(t *testing.T) {
	arms := abArms("base", "x")
	results := []ABResult{abRes("base", 1, 10), {Arm: "x", Rep: 1}, {Arm: "x", Rep: 2, Unanswered: 3}, abRes("base", 2, 10)}
	rep := &ABReport{Arms: arms, Config: ABSettings{Reps: 2}, Results: results, Summary: abSummary(arms, results), Ratios: abRatios(arms, results)}
	var b strings.Builder
	WriteABTable(&b, rep)
	if want := "| x | 0 of 2 | — | — | — | — | — | — | 3 | — | — |\n"; !strings.Contains(b.String(), want) {
		t.Errorf("table:\n%s\nwant the row %q", b.String(), want)
	}
}

// TestABResultNotes: a measurement left out of the summary and the pairs
// says why: failed, no replies in its window, or none between the
// server's usage reads; requests unanswered are said of one with replies
// as of one without.
func TestABResultNotes(t *testing.T) {
	for _, tc := range []struct {
		res  ABResult
		want []string
	}{
		{abRes("x", 1, 10), nil},
		{abFailed("x", 2), []string{"x rep 2 failed, its pairs dropped: bench: server exit: signal: killed"}},
		{ABResult{Arm: "x", Rep: 3, Unanswered: 8}, []string{
			"x rep 3 got no replies in its 0.60s window: the server or the client was starved or stalled (a busy machine?); it has no CPU per request, and the summary and the pairs leave it out",
			"x rep 3: 8 requests of the window unanswered"}},
		{ABResult{Arm: "x", Rep: 4, Requests: 12}, []string{
			"x rep 4 got 12 replies in its window but none between the server's usage reads (answered late, on a busy machine?): it has no CPU per request, and the summary and the pairs leave it out"}},
		{ABResult{Arm: "x", Rep: 5, Requests: 1000, ServerUSPerReq: 9, Unanswered: 1}, []string{"x rep 5: 1 requests of the window unanswered"}},
	} {
		if got := abResultNotes(tc.res, 600*time.Millisecond); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: notes %q, want %q", tc.res, got, tc.want)
		}
	}
}

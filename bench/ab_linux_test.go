package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// abTestArms are two arms of this test binary as server children: uring
// and epoll, or epoll twice where io_uring is disabled.
func abTestArms(t *testing.T) ([]ABArm, []string) {
	argv, env := testChildCommand()
	second := "uring"
	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && strings.TrimSpace(string(b)) != "0" {
		t.Logf("io_uring disabled here (kernel.io_uring_disabled=%s): epoll against epoll", strings.TrimSpace(string(b)))
		second = "epoll"
	}
	return []ABArm{
		{Name: "base", Command: append(slices.Clone(argv), "-arm", "epoll")},
		{Name: "new", Command: append(slices.Clone(argv), "-arm", second)},
	}, env
}

// TestRunAB runs bench ab for real, two arms of this binary's servers, two
// repetitions of a 0.6 s window: the arms alternate (reversed in the
// second repetition), every measurement answers its requests and has a
// server CPU per request and its threads' split (a request left
// unanswered on a starved machine is noted; a run with a window without
// replies is noted, and run again: runABAnswered), and the report pairs
// the two repetitions and writes its files.
func TestRunAB(t *testing.T) {
	skipUnlessLinux(t)
	arms, env := abTestArms(t)
	var progress strings.Builder
	rep := runABAnswered(t, ABConfig{
		Arms: arms, Reps: 2, Conns: 8, Warmup: 200 * time.Millisecond, Window: 600 * time.Millisecond,
		ServerEnv: env, Progress: &progress,
	})
	t.Logf("progress:\n%s", progress.String())
	if rep.Schema != ABSchemaVersion || rep.Config.Reps != 2 || rep.Config.Payload != DefaultABPayload || len(rep.Config.ServerCPUs) == 0 {
		t.Errorf("schema %q, config %+v", rep.Schema, rep.Config)
	}
	var order []string
	for _, r := range rep.Results {
		order = append(order, r.Arm)
		if r.Error != "" || r.Requests == 0 || r.ServerUSPerReq <= 0 || len(r.Threads) == 0 || r.AchievedRPS <= 0 || r.P99US <= 0 {
			t.Errorf("measurement %+v: want one without error, with replies, a server CPU per request from its threads, a rate and a p99", r)
		}
		// A server starved of its CPU on a loaded machine (a p99.9 of a
		// second under the race detector beside other tests) may leave a
		// closed-loop request of the window unanswered at the drain's
		// end: the report says so, as bench's does, and keeps the figures.
		if r.Unanswered > 0 {
			note := fmt.Sprintf("%s rep %d: %d requests of the window unanswered", r.Arm, r.Rep, r.Unanswered)
			if !slices.Contains(rep.Notes, note) {
				t.Errorf("notes %q, want %q", rep.Notes, note)
			}
		}
		if r.WaitsPerReq <= 0 {
			t.Errorf("%s rep %d: no kernel waits per request from an engine arm", r.Arm, r.Rep)
		}
	}
	if want := []string{"base", "new", "new", "base"}; !slices.Equal(order, want) {
		t.Errorf("measured %v, want %v", order, want)
	}
	if len(rep.Summary) != 2 || rep.Summary[0].Measured != 2 || rep.Summary[1].Measured != 2 || rep.Summary[1].ServerUSPerReq.Median <= 0 {
		t.Errorf("summary %+v, want two rows of 2 measured", rep.Summary)
	}
	if len(rep.Ratios) != 1 || rep.Ratios[0].Pairs != 2 || len(rep.Ratios[0].ByRep) != 2 || rep.Ratios[0].ServerUSPerReq.Median <= 0 {
		t.Errorf("ratios %+v, want new ÷ base paired in both repetitions", rep.Ratios)
	}
	dir := t.TempDir()
	if err := WriteABReport(dir, rep); err != nil {
		t.Fatal(err)
	}
	var back ABReport
	b, err := os.ReadFile(filepath.Join(dir, ReportJSON))
	if err == nil {
		err = json.Unmarshal(b, &back)
	}
	if err != nil || back.Schema != ABSchemaVersion || len(back.Results) != 4 {
		t.Errorf("report.json: %v, %d results", err, len(back.Results))
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportMarkdown))
	if err != nil || !strings.Contains(string(md), "| new | 2 of 2 |") {
		t.Errorf("report.md: %v\n%s", err, md)
	}
}

// TestRunABArmThatCannotStart: an arm whose server does not start fails
// the run before any measurement, naming the arm.
func TestRunABArmThatCannotStart(t *testing.T) {
	skipUnlessLinux(t)
	arms, env := abTestArms(t)
	arms[1].Command = append(arms[1].Command[:1:1], "-arm", "no-such-arm")
	var progress strings.Builder
	_, err := RunAB(context.Background(), ABConfig{Arms: arms, Reps: 1, Window: 100 * time.Millisecond, ServerEnv: env, Progress: &progress})
	if err == nil || !strings.Contains(err.Error(), "arm new cannot start") {
		t.Errorf("err %v, want the arm new named as one that cannot start", err)
	}
	if progress.Len() > 0 {
		t.Errorf("measured before failing:\n%s", progress.String())
	}
}

// abTries is how many runs runABAnswered makes at most.
const abTries = 4

// runABAnswered runs bench ab with cfg until a run in which every
// measurement got a server CPU per request, abTries runs at most. A window
// without replies (or without any between the server's usage reads) is a
// starved machine's: the server's loop or the client's thread, each
// pinned to its CPU beside other tests' work, did not run in it; the
// window starts once every connection is up, the server answered before
// it (its hello follows a verified echo), and the closed-loop client
// waits for its replies to the drain's end. Such a run must say so of
// each such measurement in its notes, leave it out of its summary and
// pairs, and print no figures for an arm with none measured; then it is
// run again. A harness that never gets replies fails after abTries runs.
func runABAnswered(t *testing.T, cfg ABConfig) *ABReport {
	t.Helper()
	for try := 1; ; try++ {
		rep, err := RunAB(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		var starved []string
		for _, r := range rep.Results {
			if r.Error != "" || r.measured() {
				continue
			}
			what := fmt.Sprintf("%s rep %d", r.Arm, r.Rep)
			starved = append(starved, what)
			if !slices.ContainsFunc(rep.Notes, func(n string) bool {
				return strings.HasPrefix(n, what+" got ") && strings.Contains(n, "the summary and the pairs leave it out")
			}) {
				t.Errorf("%s has no server CPU per request (%d replies), and the notes do not say so: %q", what, r.Requests, rep.Notes)
			}
		}
		if starved == nil {
			return rep
		}
		var b strings.Builder
		WriteABTable(&b, rep)
		for _, s := range rep.Summary {
			if s.Measured == 0 && !strings.Contains(b.String(), fmt.Sprintf("| %s | 0 of %d | — | — | — | — | — | — |", s.Arm, rep.Config.Reps)) {
				t.Errorf("arm %s measured in no repetition, its table row shows figures:\n%s", s.Arm, b.String())
			}
		}
		if t.Failed() || try == abTries {
			t.Fatalf("run %d of %d: %s without a server CPU per request: %q", try, abTries, strings.Join(starved, ", "), rep.Notes)
		}
		t.Logf("run %d: %s without a server CPU per request (a starved machine), run again: %q", try, strings.Join(starved, ", "), rep.Notes)
	}
}

// burnEnv, in a server child's environment, has it burn that many ms of
// a thread's own CPU right after its first usage answer (a window's
// start) on a thread that then exits, and read its next usage (the
// window's end) only once that thread is gone.
const burnEnv = "SPINDLE_BENCH_TEST_BURN_MS"

func init() {
	ms, err := strconv.Atoi(os.Getenv(burnEnv))
	if err != nil || os.Getenv(childEnv) != "1" {
		return
	}
	usageAnswered = func(n int) error {
		if n != 1 {
			return nil
		}
		_, err := burnExitingThread(time.Duration(ms) * time.Millisecond)
		return err
	}
}

// TestABChargesThreadsThatExit: a server whose thread burns CPU and exits
// inside the window is charged for that CPU. The arms' servers burn 100
// ms on such a thread between their two usage reads: their server CPU per
// request over the replies between those reads (the window's, and at most
// one per connection after it) must hold at least half of it beyond what
// their live threads ran. Summing the live threads' run times
// (/proc/PID/task) charged nothing for it.
func TestABChargesThreadsThatExit(t *testing.T) {
	skipUnlessLinux(t)
	const burn, conns = 100 * time.Millisecond, 8
	arms, env := abTestArms(t)
	rep := runABAnswered(t, ABConfig{
		Arms: arms, Reps: 1, Conns: conns, Warmup: 200 * time.Millisecond, Window: time.Second,
		ServerEnv: append(env, fmt.Sprintf("%s=%d", burnEnv, burn/time.Millisecond)),
	})
	for _, r := range rep.Results {
		var threads float64
		for _, th := range r.Threads {
			threads += th.USPerReq
		}
		// The replies between the reads: the window's, and those of the
		// drain after it (a request in flight on each connection).
		most := float64(r.Requests + conns)
		t.Logf("%s: %d replies, server %.2f µs/req, its live threads %.2f µs/req", r.Arm, r.Requests, r.ServerUSPerReq, threads)
		if exited := (r.ServerUSPerReq - threads) * most; exited < float64(burn/time.Microsecond)/2 {
			t.Errorf("%s: server %.2f µs/req, its live threads %.2f µs/req: %.0f µs at most beyond the threads, want %v burnt by a thread that exited in the window",
				r.Arm, r.ServerUSPerReq, threads, exited, burn)
		}
	}
}

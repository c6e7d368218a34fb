package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// DefaultRatioTo are the reference arms of the paired ratios when
// Config.RatioTo is nil, those of them that run: Go's netpoller, gnet and
// the plain C liburing server, the baselines issue 3 judges the engine's
// arms by.
var DefaultRatioTo = []string{"go-net", "gnet", "c-liburing"}

// driftTolerance is how far an arm's achieved rate at one load point may
// vary between repetitions (largest over smallest, less one) before the
// report says the machine drifted: beyond it the arms' medians, each taken
// over repetitions measured at other speeds, compare less well than the
// ratios of measurements made side by side.
const driftTolerance = 0.25

// ratioPoint is a load point as the paired ratios group it: the
// measurement's group without its arm, and the ServerRPS setting.
type ratioPoint struct {
	g   group
	rps string
}

// baseArm is an arm's name without its " rps=SETTING" suffix.
func baseArm(arm string) string {
	a, _, _ := strings.Cut(arm, " rps=")
	return a
}

// pairedRatios returns, for each arm of refs (in that order) that has
// results, each load point it was measured at and each other arm measured
// there (in the order of results), the other arm's server CPU per request
// and p99 divided by the reference's of the same repetition at that load
// point, with ServerRPS settings within the same setting (a reference
// names the arm without " rps="). The two measurements of a repetition
// were made close together (armOrder), so a drift of the machine's speed
// over the run moves both: a ratio per repetition is less noisy than the
// ratio of the medians. A repetition pairs when both measurements have
// replies and the reference's figures are above zero.
func pairedRatios(results []Result, refs []string) []PairedRatio {
	type key struct {
		p   ratioPoint
		arm string
		rep int
	}
	byKey := map[key]Result{}
	var points []ratioPoint
	arms := map[ratioPoint][]string{}
	reps := map[ratioPoint][]int{}
	for _, res := range results {
		g := groupOf(res)
		g.arm = ""
		p := ratioPoint{g, res.ServerRPS}
		if _, ok := arms[p]; !ok {
			points = append(points, p)
		}
		if !slices.Contains(arms[p], res.Arm) {
			arms[p] = append(arms[p], res.Arm)
		}
		if !slices.Contains(reps[p], res.Rep) {
			reps[p] = append(reps[p], res.Rep)
		}
		byKey[key{p, res.Arm, res.Rep}] = res
	}
	var out []PairedRatio
	for _, ref := range refs {
		for _, p := range points {
			i := slices.IndexFunc(arms[p], func(a string) bool { return baseArm(a) == ref })
			if i < 0 {
				continue
			}
			refArm := arms[p][i]
			for _, arm := range arms[p] {
				if arm == refArm {
					continue
				}
				pr := PairedRatio{Ref: refArm, Arm: arm, Mode: p.g.mode, Fraction: p.g.frac, ComputeUS: p.g.cu, Loops: p.g.loops}
				var cpu, p99 []float64
				for _, rep := range slices.Sorted(slices.Values(reps[p])) {
					a, aok := byKey[key{p, arm, rep}]
					d, dok := byKey[key{p, refArm, rep}]
					if !aok || !dok || a.Requests == 0 || d.Requests == 0 || d.Server.TotalUSPerReq <= 0 || d.Latency.P99 <= 0 {
						continue
					}
					rr := RepRatio{Rep: rep, ServerUSPerReq: a.Server.TotalUSPerReq / d.Server.TotalUSPerReq, P99: a.Latency.P99 / d.Latency.P99}
					pr.ByRep = append(pr.ByRep, rr)
					cpu, p99 = append(cpu, rr.ServerUSPerReq), append(p99, rr.P99)
					if rr.ServerUSPerReq <= 1 {
						pr.ServerAtMost1++
					}
					if rr.P99 <= 1 {
						pr.P99AtMost1++
					}
				}
				pr.Pairs = len(pr.ByRep)
				pr.ServerUSPerReq, pr.P99 = spreadOf(cpu), spreadOf(p99)
				out = append(out, pr)
			}
		}
	}
	return out
}

// ratioRefs returns the reference arms of the paired ratios: want as
// given, or when nil those of DefaultRatioTo that are among ran.
func ratioRefs(want, ran []string) []string {
	if want != nil {
		return want
	}
	refs := []string{}
	for _, a := range DefaultRatioTo {
		if slices.Contains(ran, a) {
			refs = append(refs, a)
		}
	}
	return refs
}

// driftRow is what driftNotes reads of a summary row: its arm, load
// point, number of repetitions and achieved rate, and whether the report
// has paired ratios of the arm at that point.
type driftRow struct {
	arm, point string
	reps       int
	rps        Spread
	paired     bool
}

// driftNotes returns a note for each load point of rows at which an arm's
// achieved rate varied between repetitions by more than driftTolerance
// (largest over smallest), naming those arms; the note sends the reader
// to the paired ratios where the report has some at that point, else to
// the repetitions' results.
func driftNotes(rows []driftRow) []string {
	var order []string
	drifted := map[string][]string{}
	paired := map[string]bool{}
	for _, s := range rows {
		lo, hi := s.rps.Min, s.rps.Max
		if s.reps < 2 || lo <= 0 || hi <= lo*(1+driftTolerance) {
			continue
		}
		if _, ok := drifted[s.point]; !ok {
			order = append(order, s.point)
		}
		drifted[s.point] = append(drifted[s.point], fmt.Sprintf("%s %.0f–%.0f req/s (+%.0f%%)", s.arm, lo, hi, 100*(hi/lo-1)))
		paired[s.point] = paired[s.point] || s.paired
	}
	var notes []string
	for _, p := range order {
		compare := "compare the arms here repetition by repetition (the results, each repetition's arms measured side by side), not by ratios of their medians"
		if paired[p] {
			compare = "the paired ratios at this load point (each repetition's measurement divided by the reference arm's of the same repetition, made side by side) are the ones to trust, over ratios of each arm's medians"
		}
		notes = append(notes, fmt.Sprintf("%s: the achieved rate varied between repetitions by more than %.0f%% (%s): the machine's speed drifted during the run, and each arm's median mixes repetitions measured at different speeds; %s",
			p, driftTolerance*100, strings.Join(drifted[p], ", "), compare))
	}
	return notes
}

// sideDriftNotes is driftNotes for a side-by-side report's summary rows,
// each read by row: those reports have no paired ratios.
func sideDriftNotes[S any](rows []S, row func(S) driftRow) []string {
	drift := make([]driftRow, len(rows))
	for i, s := range rows {
		drift[i] = row(s)
	}
	return driftNotes(drift)
}

// ratioTables groups a report's paired ratios by reference arm, in their
// order: what Markdown and WriteTable print a table each of.
func ratioTables(rep *Report) (refs []string, rows map[string][]PairedRatio) {
	rows = map[string][]PairedRatio{}
	for _, p := range rep.PairedRatios {
		if _, ok := rows[p.Ref]; !ok {
			refs = append(refs, p.Ref)
		}
		rows[p.Ref] = append(rows[p.Ref], p)
	}
	return refs, rows
}

// ratioPointRow is a paired ratio's load point as a SummaryRow, for
// pointOf.
func ratioPointRow(p PairedRatio) SummaryRow {
	return SummaryRow{Arm: p.Arm, Mode: p.Mode, Fraction: p.Fraction, ComputeUS: p.ComputeUS, Loops: p.Loops}
}

// fmtRatio is a ratio's median (min–max) and the count of pairs at or
// below 1, or "—" without pairs.
func fmtRatio(s Spread, atMost1, pairs int) (string, string) {
	if pairs == 0 {
		return "—", "—"
	}
	return fmtSpread(s, 2), fmt.Sprintf("%d of %d", atMost1, pairs)
}

// ratioMarkdown renders rep's paired ratios as a Markdown section per
// reference arm, or "" when it has none.
func ratioMarkdown(rep *Report) string {
	refs, rows := ratioTables(rep)
	var b strings.Builder
	for _, ref := range refs {
		fmt.Fprintf(&b, "\n## Server CPU per request, ratio to %s, paired by repetition\n\n", ref)
		fmt.Fprintf(&b, "Each arm's server CPU µs per request, and its p99, divided by %s's in the same repetition at the same load point (the two measured close together, the arms alternating within the repetition): median (min–max) over the repetitions, and in how many of them the ratio was 1 or below (the arm no dearer, or no slower, than %s).\n\n", ref, ref)
		b.WriteString("| arm | load | server CPU ratio | ≤ 1 | p99 ratio | ≤ 1 | server CPU ratio by rep |\n")
		b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | --- |\n")
		for _, p := range rows[ref] {
			cpu, cpuN := fmtRatio(p.ServerUSPerReq, p.ServerAtMost1, p.Pairs)
			p99, p99N := fmtRatio(p.P99, p.P99AtMost1, p.Pairs)
			by := make([]string, len(p.ByRep))
			for i, r := range p.ByRep {
				by[i] = fmt.Sprintf("%d: %.2f", r.Rep, r.ServerUSPerReq)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", p.Arm, pointOf(rep, ratioPointRow(p)), cpu, cpuN, p99, p99N, strings.Join(by, ", "))
		}
	}
	return b.String()
}

// writeRatioTable prints rep's paired ratios as plain-text tables, one per
// reference arm.
func writeRatioTable(w io.Writer, rep *Report) {
	refs, rows := ratioTables(rep)
	for _, ref := range refs {
		fmt.Fprintf(w, "\nserver CPU per request and p99, ratio to %s, paired by repetition: median (min–max), pairs at or below 1\n", ref)
		fmt.Fprintf(w, "%-22s %-24s %-20s %-8s %-20s %s\n", "arm", "load", "server CPU ratio", "≤ 1", "p99 ratio", "≤ 1")
		for _, p := range rows[ref] {
			cpu, cpuN := fmtRatio(p.ServerUSPerReq, p.ServerAtMost1, p.Pairs)
			p99, p99N := fmtRatio(p.P99, p.P99AtMost1, p.Pairs)
			fmt.Fprintf(w, "%-22s %-24s %-20s %-8s %-20s %s\n", p.Arm, pointOf(rep, ratioPointRow(p)), cpu, cpuN, p99, p99N)
		}
	}
}

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

// repPair is one repetition of a pairing: the arm's measurement and the
// reference's.
type repPair[R any] struct {
	rep  int
	a, d R
}

// eachPairing calls pair for each arm of refs (in that order) measured at
// a load point, each load point it was measured at and each other arm
// measured there (in the order of results), with the repetitions in which
// both were measured, in order. at says a result's load point, arm and
// repetition; a reference names the arm without " rps=SETTING" (baseArm).
// The two measurements of a repetition were made close together
// (armOrder), so a drift of the machine's speed over the run moves both:
// a ratio per repetition is less noisy than the ratio of the medians.
func eachPairing[R any, P comparable](results []R, refs []string, at func(R) (P, string, int), pair func(ref, arm string, p P, pairs []repPair[R])) {
	type key struct {
		p   P
		arm string
		rep int
	}
	byKey := map[key]R{}
	var points []P
	arms := map[P][]string{}
	reps := map[P][]int{}
	for _, res := range results {
		p, arm, rep := at(res)
		if _, ok := arms[p]; !ok {
			points = append(points, p)
		}
		if !slices.Contains(arms[p], arm) {
			arms[p] = append(arms[p], arm)
		}
		if !slices.Contains(reps[p], rep) {
			reps[p] = append(reps[p], rep)
		}
		byKey[key{p, arm, rep}] = res
	}
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
				var pairs []repPair[R]
				for _, rep := range slices.Sorted(slices.Values(reps[p])) {
					a, aok := byKey[key{p, arm, rep}]
					d, dok := byKey[key{p, refArm, rep}]
					if aok && dok {
						pairs = append(pairs, repPair[R]{rep, a, d})
					}
				}
				pair(refArm, arm, p, pairs)
			}
		}
	}
}

// atMost1 counts the ratios of v that are 1 or below.
func atMost1(v []float64) int {
	n := 0
	for _, r := range v {
		if r <= 1 {
			n++
		}
	}
	return n
}

// pairedRatios returns, for each arm of refs (in that order) that has
// results, each load point it was measured at and each other arm measured
// there (in the order of results), the other arm's server CPU per request
// and p99 divided by the reference's of the same repetition at that load
// point, with ServerRPS settings within the same setting (a reference
// names the arm without " rps="); eachPairing says why by repetition. A
// repetition pairs when both measurements have replies and the
// reference's figures are above zero (figureRatios, whole).
func pairedRatios(results []Result, refs []string) []PairedRatio {
	var out []PairedRatio
	at := func(res Result) (ratioPoint, string, int) {
		g := groupOf(res)
		g.arm = ""
		return ratioPoint{g, res.ServerRPS}, res.Arm, res.Rep
	}
	figures := func(res Result) (uint64, armsFigures) {
		return res.Requests, armsFigures{figServer: res.Server.TotalUSPerReq, figP99: res.Latency.P99}
	}
	eachPairing(results, refs, at, func(ref, arm string, p ratioPoint, pairs []repPair[Result]) {
		byRep, ratios := figureRatios(pairs, figures, []armsFigure{figServer, figP99})
		pr := PairedRatio{Ref: ref, Arm: arm, Mode: p.g.mode, Fraction: p.g.frac, ComputeUS: p.g.cu, Loops: p.g.loops, Pairs: len(byRep)}
		for _, rr := range byRep {
			pr.ByRep = append(pr.ByRep, RepRatio{Rep: rr.Rep, ServerUSPerReq: rr.ServerUSPerReq, P99: rr.P99})
		}
		cpu, p99 := ratios[figServer], ratios[figP99]
		pr.ServerUSPerReq, pr.P99 = spreadOf(cpu), spreadOf(p99)
		pr.ServerAtMost1, pr.P99AtMost1 = atMost1(cpu), atMost1(p99)
		out = append(out, pr)
	})
	return out
}

// figureRatios divides the figures of each pair's measurements, the arm's
// by the reference's (figures gives a measurement's replies and figures):
// the ratios by repetition, each 0 where the repetition did not pair on
// the figure, and each figure's over the repetitions. A repetition pairs
// when both measurements have replies; then a figure pairs when both
// have it above 0. With whole (a load point's figures), a repetition
// pairs on those figures or on none: when the reference has each of them
// above 0, the arm's figure dividing as it is (0 a ratio of 0).
func figureRatios[R any](pairs []repPair[R], figures func(R) (uint64, armsFigures), whole []armsFigure) (byRep []ArmsRepRatio, ratios [numArmsFigures][]float64) {
	for _, rp := range pairs {
		an, af := figures(rp.a)
		dn, df := figures(rp.d)
		if an == 0 || dn == 0 || slices.ContainsFunc(whole, func(f armsFigure) bool { return df[f] <= 0 }) {
			continue
		}
		rr := ArmsRepRatio{Rep: rp.rep}
		for f := range numArmsFigures {
			if df[f] > 0 && (af[f] > 0 || slices.Contains(whole, f)) {
				*rr.figure(f) = af[f] / df[f]
				ratios[f] = append(ratios[f], af[f]/df[f])
			}
		}
		byRep = append(byRep, rr)
	}
	return byRep, ratios
}

// ratioRefs returns the reference arms of the paired ratios: want as
// given, or when nil those of def that are among ran.
func ratioRefs(want, def, ran []string) []string {
	if want != nil {
		return want
	}
	refs := []string{}
	for _, a := range def {
		if slices.Contains(ran, a) {
			refs = append(refs, a)
		}
	}
	return refs
}

// runRatioRefs returns the reference arms of a run's paired ratios, those
// of want, or when nil of def, that ran (ratioRefs), nil for none, and
// adds to notes one for each given that was skipped; a reference not
// among arms is an error.
func runRatioRefs(want, def []string, arms []ArmInfo, notes *[]string) ([]string, error) {
	var asked, ran []string
	for _, a := range arms {
		asked = append(asked, a.Name)
		if a.Skipped == "" {
			ran = append(ran, a.Name)
		}
	}
	refs := ratioRefs(want, def, ran)
	for _, ref := range refs {
		j := slices.IndexFunc(arms, func(a ArmInfo) bool { return a.Name == ref })
		if j < 0 {
			return nil, fmt.Errorf("bench: ratio reference %q is not one of this run's arms (%s)", ref, strings.Join(asked, ", "))
		}
		if arms[j].Skipped != "" {
			*notes = append(*notes, fmt.Sprintf("no paired ratios to %s: it was skipped", ref))
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	return refs, nil
}

// CheckRatioTo refuses a reference (a RatioTo of Config, ProxyConfig or
// HTTP2Config) given twice or, when arms (those asked for) is not nil,
// one not among them.
func CheckRatioTo(refs, arms []string) error {
	for i, ref := range refs {
		if slices.Contains(refs[:i], ref) {
			return fmt.Errorf("bench: ratio reference %q given twice", ref)
		}
		if arms != nil && !slices.Contains(arms, ref) {
			return fmt.Errorf("bench: ratio reference %q is not one of the arms asked for (%s)", ref, strings.Join(arms, ", "))
		}
	}
	return nil
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

// ratioTables groups paired ratios by reference arm (ref says a row's),
// in their order: what the Markdown and plain-text tables print a table
// each of.
func ratioTables[T any](ratios []T, ref func(T) string) (refs []string, rows map[string][]T) {
	rows = map[string][]T{}
	for _, p := range ratios {
		if _, ok := rows[ref(p)]; !ok {
			refs = append(refs, ref(p))
		}
		rows[ref(p)] = append(rows[ref(p)], p)
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
	refs, rows := ratioTables(rep.PairedRatios, func(p PairedRatio) string { return p.Ref })
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
	refs, rows := ratioTables(rep.PairedRatios, func(p PairedRatio) string { return p.Ref })
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

// armsFigure is a figure of a side-by-side report's paired ratios.
type armsFigure int

const (
	figProxy armsFigure = iota
	figUpstream
	figSum
	figServer
	figP99
	numArmsFigures
)

// armsFigureNames are the figures' names in the tables.
var armsFigureNames = [numArmsFigures]string{"proxy", "upstream", "proxy+upstream", "server", "p99"}

// figure is where p keeps figure f's ratios.
func (p *ArmsPairedRatio) figure(f armsFigure) **RatioSpread {
	return [numArmsFigures]**RatioSpread{&p.ProxyUSPerReq, &p.UpstreamUSPerReq, &p.ProxyUpstreamUSPerReq, &p.ServerUSPerReq, &p.P99}[f]
}

// figure is where r keeps figure f's ratio.
func (r *ArmsRepRatio) figure(f armsFigure) *float64 {
	return [numArmsFigures]*float64{&r.ProxyUSPerReq, &r.UpstreamUSPerReq, &r.ProxyUpstreamUSPerReq, &r.ServerUSPerReq, &r.P99}[f]
}

// armsFigures are a measurement's figures the paired ratios divide, 0
// for one not measured.
type armsFigures [numArmsFigures]float64

// ratioFigures are a proxy measurement's: the proxy's CPU per request
// (0 for direct), the upstream's, their sum where both were measured (for
// direct the upstream's alone) and p99.
func (r ProxyResult) ratioFigures() armsFigures {
	f := armsFigures{figProxy: r.ProxyUSPerReq, figUpstream: r.UpstreamUSPerReq, figP99: r.Latency.P99}
	if r.UpstreamUSPerReq > 0 && (r.ProxyUSPerReq > 0 || r.Arm == ProxyArmDirect) {
		f[figSum] = r.ProxyUSPerReq + r.UpstreamUSPerReq
	}
	return f
}

// ratioFigures are an HTTP/2 measurement's: the server's CPU per request
// and p99.
func (r HTTP2Result) ratioFigures() armsFigures {
	return armsFigures{figServer: r.ServerUSPerReq, figP99: r.Latency.P99}
}

// armsRatioResult is what armsPairedRatios reads of a measurement.
type armsRatioResult interface {
	sample() armSample
	ratioFigures() armsFigures
}

// proxyPairedRatios are bench proxy's paired ratios: armsPairedRatios.
func proxyPairedRatios(results []ProxyResult, refs []string) []ArmsPairedRatio {
	return armsPairedRatios(results, refs)
}

// http2PairedRatios are bench http2's paired ratios: armsPairedRatios.
func http2PairedRatios(results []HTTP2Result, refs []string) []ArmsPairedRatio {
	return armsPairedRatios(results, refs)
}

// armsPairedRatios returns a side-by-side report's paired ratios: for each
// arm of refs (in that order), each streams value and each other arm
// measured there, that arm's figures divided by the reference's of the
// same repetition (eachPairing). A repetition pairs when both measurements
// have replies, and on a figure when both have it above 0.
func armsPairedRatios[R armsRatioResult](results []R, refs []string) []ArmsPairedRatio {
	var out []ArmsPairedRatio
	at := func(r R) (int, string, int) { s := r.sample(); return s.streams, s.arm, s.rep }
	figures := func(r R) (uint64, armsFigures) { return r.sample().requests, r.ratioFigures() }
	eachPairing(results, refs, at, func(ref, arm string, streams int, pairs []repPair[R]) {
		byRep, ratios := figureRatios(pairs, figures, nil)
		pr := ArmsPairedRatio{Ref: ref, Arm: arm, Streams: streams, Pairs: len(byRep), ByRep: byRep}
		for f, v := range ratios {
			if len(v) > 0 {
				*pr.figure(armsFigure(f)) = &RatioSpread{Spread: spreadOf(v), Pairs: len(v), AtMost1: atMost1(v)}
			}
		}
		out = append(out, pr)
	})
	return out
}

// armsRatioCell is a figure's ratios as median (min–max) and the count of
// pairs at or below 1, or "—" without them.
func armsRatioCell(s *RatioSpread) (string, string) {
	if s == nil {
		return "—", "—"
	}
	return fmtRatio(s.Spread, s.AtMost1, s.Pairs)
}

// armsRatioLayout is how a side-by-side report's paired-ratio tables
// look: the figures, a column each; the one whose ratios are listed
// repetition by repetition; what the figures are; what a "—" means; and
// whether the rows have a streams column.
type armsRatioLayout struct {
	figs          []armsFigure
	byRep         armsFigure
	what, missing string
	streams       bool
}

// markdown renders ratios as a Markdown section per reference arm, or ""
// when there are none.
func (l armsRatioLayout) markdown(ratios []ArmsPairedRatio) string {
	refs, rows := ratioTables(ratios, func(p ArmsPairedRatio) string { return p.Ref })
	at, head, align := "the same load point", "| arm |", "| --- |"
	if l.streams {
		at, head, align = "the same streams", head+" streams |", align+" ---: |"
	}
	for _, f := range l.figs {
		head += fmt.Sprintf(" %s ratio | ≤ 1 |", armsFigureNames[f])
		align += " ---: | ---: |"
	}
	head += fmt.Sprintf(" %s ratio by rep |\n", armsFigureNames[l.byRep])
	align += " --- |\n"
	var b strings.Builder
	for _, ref := range refs {
		fmt.Fprintf(&b, "\n## Ratios to %s, paired by repetition\n\n", ref)
		fmt.Fprintf(&b, "Each arm's %s, divided by %s's in the same repetition at %s (the two measured close together, the arms alternating within the repetition): median (min–max) over the repetitions, and in how many of them the ratio was 1 or below (the arm no dearer, or no slower, than %s); — where no repetition paired on the figure: %s.\n\n", l.what, ref, at, ref, l.missing)
		b.WriteString(head + align)
		for _, p := range rows[ref] {
			fmt.Fprintf(&b, "| %s |", p.Arm)
			if l.streams {
				fmt.Fprintf(&b, " %d |", p.Streams)
			}
			for _, f := range l.figs {
				r, n := armsRatioCell(*p.figure(f))
				fmt.Fprintf(&b, " %s | %s |", r, n)
			}
			var by []string
			for _, r := range p.ByRep {
				if v := *r.figure(l.byRep); v != 0 {
					by = append(by, fmt.Sprintf("%d: %.2f", r.Rep, v))
				}
			}
			fmt.Fprintf(&b, " %s |\n", strings.Join(by, ", "))
		}
	}
	return b.String()
}

// writeTable prints ratios as plain-text tables, one per reference arm.
func (l armsRatioLayout) writeTable(w io.Writer, ratios []ArmsPairedRatio) {
	refs, rows := ratioTables(ratios, func(p ArmsPairedRatio) string { return p.Ref })
	line := func(arm, streams string, cells []string) {
		l := fmt.Sprintf("%-17s", arm)
		if streams != "" {
			l += fmt.Sprintf(" %7s", streams)
		}
		for i, c := range cells {
			// A figure's ratio, then its count at or below 1.
			l += fmt.Sprintf(" %-*s", 20-12*(i%2), c)
		}
		fmt.Fprintln(w, strings.TrimRight(l, " "))
	}
	for _, ref := range refs {
		fmt.Fprintf(w, "\n%s, ratio to %s, paired by repetition: median (min–max), pairs at or below 1\n", l.what, ref)
		var head []string
		for _, f := range l.figs {
			head = append(head, armsFigureNames[f], "≤ 1")
		}
		streams := ""
		if l.streams {
			streams = "streams"
		}
		line("arm", streams, head)
		for _, p := range rows[ref] {
			var cells []string
			for _, f := range l.figs {
				r, n := armsRatioCell(*p.figure(f))
				cells = append(cells, r, n)
			}
			if l.streams {
				streams = fmt.Sprint(p.Streams)
			}
			line(p.Arm, streams, cells)
		}
	}
}

// sidePaired reports whether ratios pair arm at streams with another arm
// in at least one repetition: whether a drift note there sends the reader
// to the paired ratios.
func sidePaired(ratios []ArmsPairedRatio, arm string, streams int) bool {
	return slices.ContainsFunc(ratios, func(p ArmsPairedRatio) bool {
		return p.Pairs > 0 && (p.Arm == arm || p.Ref == arm) && p.Streams == streams
	})
}

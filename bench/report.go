package bench

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Report file names inside the report directory.
const (
	ReportJSON     = "report.json"
	ReportMarkdown = "report.md"
	ReportHTML     = "report.html"
)

// WriteReport writes rep into dir (created if needed) as JSON, Markdown and
// an HTML page with inline SVG charts. Each file is written whole to a
// temporary file in dir, then renamed over its name once all three are
// written: a write that fails (a full disk) or is interrupted leaves the
// previous report, and a symbolic link at a file's name is replaced, not
// written through.
func WriteReport(dir string, rep *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return writeFiles(dir, []string{ReportJSON, ReportMarkdown, ReportHTML},
		[][]byte{append(js, '\n'), []byte(Markdown(rep)), []byte(HTML(rep))})
}

// writeFiles writes each of data to a temporary file in dir, then renames
// them over names once all are written, so that a failed or interrupted
// write leaves the previous files and a symbolic link at a name is
// replaced, not written through.
func writeFiles(dir string, names []string, data [][]byte) error {
	var tmps []string
	defer func() {
		for _, t := range tmps {
			os.Remove(t) // gone once renamed
		}
	}()
	for i, name := range names {
		t, err := writeTemp(dir, name, data[i])
		if err != nil {
			return err
		}
		tmps = append(tmps, t)
	}
	for i, name := range names {
		if err := os.Rename(tmps[i], filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// writeTemp writes b, synced, to a new file in dir named after name with
// mode 0644, and returns its path. On error it removes the file.
func writeTemp(dir, name string, b []byte) (string, error) {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// ReadReport reads a report.json file of the current schema or of
// SchemaVersion1; the report keeps the Schema it was written with (a
// version 1 report's machine figures count steal as busy).
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	if rep.Schema != SchemaVersion && rep.Schema != SchemaVersion1 {
		return nil, fmt.Errorf("bench: %s: schema %q, want %q or %q", path, rep.Schema, SchemaVersion, SchemaVersion1)
	}
	return &rep, nil
}

func loadPoint(s SummaryRow) string {
	if s.Mode == "open" && s.Fraction == 0 {
		// bench ab's: a rate given, not a fraction of a peak.
		return fmt.Sprintf("open %.0f req/s", s.OfferedRPS)
	}
	if s.Mode == "open" {
		return fmt.Sprintf("open %.0f%%", s.Fraction*100)
	}
	return s.Mode
}

func fmtSpread(s Spread, prec int) string {
	if s.Min == s.Max {
		return fmt.Sprintf("%.*f", prec, s.Median)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, s.Median, prec, s.Min, prec, s.Max)
}

// offeredText is a summary's offered rate for the tables: "—" in closed
// loop, which offers no rate.
func offeredText(s SummaryRow) string {
	if s.OfferedRPS > 0 {
		return fmt.Sprintf("%.0f", s.OfferedRPS)
	}
	return "—"
}

// WriteTable prints the summary as a plain-text table.
func WriteTable(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "\n%s, %s topology, %d reps, medians (min–max); latency in µs, CPU in µs per request\n",
		rep.Kind, rep.Topology, rep.Config.Reps)
	fmt.Fprintf(w, "%-15s %-9s %5s %5s %9s %-24s %10s %-22s %-22s %-22s %9s %-18s %-18s %8s %8s %7s\n",
		"arm", "load", "loops", "cmpµs", "offered", "achieved req/s", "unanswered", "p50", "p99", "p99.9", "p99.99", "server µs/req", "machine work µs/req", "softirq", "steal", "client%")
	for _, s := range rep.Summary {
		fmt.Fprintf(w, "%-15s %-9s %5d %5d %9s %-24s %10d %-22s %-22s %-22s %9.1f %-18s %-18s %8.2f %8.2f %7.0f\n",
			s.Arm, loadPoint(s), s.Loops, s.ComputeUS, offeredText(s), fmtSpread(s.AchievedRPS, 0), s.Unanswered, fmtSpread(s.P50, 1), fmtSpread(s.P99, 1),
			fmtSpread(s.P999, 1), s.P9999.Median, fmtSpread(s.ServerUSPerReq, 2), fmtSpread(s.MachineWorkUSPerReq, 2), s.SoftirqUSPerReq, s.StealUSPerReq, s.ClientCPUPercent)
	}
	if rep.ClientCeilingRPS > 0 {
		fmt.Fprintf(w, "client ceiling ≈ %.0f req/s per client CPU (best closed-loop rate / client CPU share)\n", rep.ClientCeilingRPS)
	}
	writeRatioTable(w, rep)
	writeTableNotes(w, rep.Notes)
}

// Markdown renders rep as a Markdown document.
func Markdown(rep *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# spindle %s report\n\n", rep.Kind)
	writeHostLine(&b, rep.Host)
	fmt.Fprintf(&b, "- topology: **%s**; server CPUs %v, client CPUs %v (%d client threads)\n", rep.Topology, rep.Config.ServerCPUs, rep.Config.ClientCPUs, rep.Config.ClientThreads)
	server := fmt.Sprintf("compute %d µs", rep.Config.ComputeUS)
	if rep.Kind == "sweep" && len(rep.Config.SweepLoops) > 0 {
		server = fmt.Sprintf("a grid of loops %s × compute %s µs", intsText(rep.Config.SweepLoops), intsText(rep.Config.SweepComputeUS))
	}
	fmt.Fprintf(&b, "- %d connections, %d in flight each (closed loop), %d-byte payload, %s, %d reps, each %.2fs warm-up + %.2fs measured; started %s, %.0fs\n",
		rep.Config.Conns, rep.Config.InFlight, rep.Config.Payload, server, rep.Config.Reps,
		rep.Config.WarmupSeconds, rep.Config.WindowSeconds, rep.Started.Format("2006-01-02 15:04 UTC"), rep.Seconds)
	if rep.ClientCeilingRPS > 0 {
		fmt.Fprintf(&b, "- client ceiling ≈ %.0f req/s per client CPU\n", rep.ClientCeilingRPS)
	}
	b.WriteString("\nMedians over the repetitions with (min–max); latency in µs (open loop: from the intended send time); CPU in µs per request: server process (getrusage) and machine-wide (/proc/stat, without the client's empty polls: \"machine work\"), softirq machine-wide, and steal: time the hypervisor ran something else while this machine's CPUs had work, not in machine work.\n\n")
	b.WriteString("| arm | load | loops | compute µs | offered req/s | achieved req/s | unanswered | p50 | p90 | p99 | p99.9 | p99.99 | max | server CPU µs/req | machine work CPU µs/req | softirq µs/req | steal µs/req | client CPU % |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range rep.Summary {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %d | %s | %.1f | %s | %s | %.1f | %.1f | %s | %s | %.2f | %.2f | %.0f |\n",
			s.Arm, loadPoint(s), s.Loops, s.ComputeUS, offeredText(s), fmtSpread(s.AchievedRPS, 0), s.Unanswered, fmtSpread(s.P50, 1), s.P90.Median,
			fmtSpread(s.P99, 1), fmtSpread(s.P999, 1), s.P9999.Median, s.Max.Median, fmtSpread(s.ServerUSPerReq, 2),
			fmtSpread(s.MachineWorkUSPerReq, 2), s.SoftirqUSPerReq, s.StealUSPerReq, s.ClientCPUPercent)
	}
	b.WriteString(ratioMarkdown(rep))
	writeArmsAndNotes(&b, rep.Arms, rep.Notes)
	return b.String()
}

// intsText is v as "1, 2, 3".
func intsText(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// writeHostLine appends a Markdown report's line on the host it was made
// on.
func writeHostLine(b *strings.Builder, h Host) {
	fmt.Fprintf(b, "- host: %s, %s, %d CPUs (%s), %s", h.Hostname, h.Kernel, h.CPUs, h.CPUModel, h.GoVersion)
	if h.TCPCongestion != "" {
		fmt.Fprintf(b, ", TCP congestion control %s", h.TCPCongestion)
	}
	b.WriteString("\n")
}

// writeArmsAndNotes appends a Markdown report's "Arms" section (each arm's
// summary, or why it was skipped) and its "Notes", each where it has any.
func writeArmsAndNotes(b *strings.Builder, arms []ArmInfo, notes []string) {
	if len(arms) > 0 {
		b.WriteString("\n## Arms\n\n")
		for _, a := range arms {
			if a.Skipped != "" {
				fmt.Fprintf(b, "- **%s** — %s — *skipped: %s*\n", mdText(a.Name), mdText(a.Summary), mdText(a.Skipped))
			} else {
				fmt.Fprintf(b, "- **%s** — %s\n", mdText(a.Name), mdText(a.Summary))
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range notes {
			fmt.Fprintf(b, "- %s\n", mdText(n))
		}
	}
}

// mdText makes s one line of Markdown text: notes and skip reasons carry
// tools' output (go build's "# package" lines, a compiler's "#include
// <liburing.h>"), whose line breaks would end the list item and whose
// characters would read as markup. Lines are joined with " / ", and
// Markdown's markup characters are escaped.
func mdText(s string) string {
	var lines []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return mdEscaper.Replace(strings.Join(lines, " / "))
}

var mdEscaper = strings.NewReplacer(`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "<", `\<`, ">", `\>`, "[", `\[`, "]", `\]`, "|", `\|`)

// palette colours the arms in charts.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

func armColours(rep *Report) map[string]string {
	m := map[string]string{}
	for _, r := range rep.Results {
		if _, ok := m[r.Arm]; !ok {
			m[r.Arm] = palette[len(m)%len(palette)]
		}
	}
	return m
}

// HTML renders rep as a self-contained page with inline SVG charts: the
// latency percentile spectrum per arm and load point, throughput against
// p99, and the CPU split per request.
func HTML(rep *Report) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>spindle bench</title><style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child,th:first-child{text-align:left}
svg{background:#fff;border:1px solid #ddd;margin:6px}text{font-size:11px;font-family:sans-serif}.note{color:#a40}
</style></head><body>`)
	fmt.Fprintf(&b, "<h1>spindle %s — %s topology</h1>\n", html.EscapeString(rep.Kind), html.EscapeString(rep.Topology))
	md := Markdown(rep)
	// The summary table, as HTML: the Markdown's first table.
	b.WriteString(mdHTML(firstMDTable(md)))
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "<p class=note>%s</p>\n", html.EscapeString(n))
	}
	b.WriteString(mdHTML(ratioMarkdown(rep)))
	colours := armColours(rep)
	b.WriteString("<h2>Latency percentile spectrum</h2>\n")
	for _, point := range loadPoints(rep) {
		b.WriteString(spectrumSVG(rep, point, colours))
	}
	b.WriteString("<h2>Throughput against p99</h2>\n")
	b.WriteString(throughputSVG(rep, colours))
	b.WriteString("<h2>CPU per request</h2>\n<p>Stacked: machine-wide user, system, irq and softirq CPU-µs per request (/proc/stat), in grey the client's empty polls (busy CPU that is not work), and hatched the steal time (the hypervisor ran something else; not this machine's work); the black tick is the server process alone (getrusage). Softirq moved off the server's books is relocation, not reduction.</p>\n")
	b.WriteString(cpuSVG(rep, colours))
	b.WriteString("<h2>Run</h2><pre>" + html.EscapeString(md) + "</pre></body></html>\n")
	return b.String()
}

// firstMDTable returns the lines of md's first Markdown table.
func firstMDTable(md string) string {
	i := strings.Index(md, "\n|")
	if i < 0 {
		return ""
	}
	t := md[i+1:]
	if j := strings.Index(t, "\n\n"); j >= 0 {
		t = t[:j+1]
	}
	return t
}

// mdHTML renders the Markdown the report writes for HTML: "## " headings,
// tables (the first row a header, the alignment row dropped) and
// paragraphs; other lines (the header's list) are left out.
func mdHTML(md string) string {
	var b strings.Builder
	inTable, header := false, false
	for line := range strings.Lines(md) {
		line = strings.TrimRight(line, "\n")
		isRow := strings.HasPrefix(line, "| ")
		if inTable && !isRow {
			b.WriteString("</table>\n")
			inTable = false
		}
		switch {
		case isRow && strings.HasPrefix(line, "| ---"):
		case isRow:
			if !inTable {
				b.WriteString("<table>")
				inTable, header = true, true
			}
			tag := "td"
			if header {
				tag, header = "th", false
			}
			b.WriteString("<tr>")
			// Only the row's outer bars go: an empty first or last cell
			// is a cell.
			for _, c := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |"), " | ") {
				fmt.Fprintf(&b, "<%s>%s</%s>", tag, html.EscapeString(strings.TrimSpace(c)), tag)
			}
			b.WriteString("</tr>\n")
		case strings.HasPrefix(line, "## "):
			fmt.Fprintf(&b, "<h2>%s</h2>\n", html.EscapeString(line[3:]))
		case line != "" && !strings.HasPrefix(line, "- ") && !strings.HasPrefix(line, "# "):
			fmt.Fprintf(&b, "<p>%s</p>\n", html.EscapeString(line))
		}
	}
	if inTable {
		b.WriteString("</table>\n")
	}
	return b.String()
}

func loadPoints(rep *Report) []string {
	var pts []string
	for _, s := range rep.Summary {
		if p := pointOf(rep, s); !slices.Contains(pts, p) {
			pts = append(pts, p)
		}
	}
	return pts
}

func pointOf(rep *Report, s SummaryRow) string {
	if rep.Kind == "sweep" {
		return fmt.Sprintf("loops %d compute %dµs", s.Loops, s.ComputeUS)
	}
	return loadPoint(s)
}

// chart maps data to an SVG plot area.
type chart struct {
	w, h, left, right, top, bottom float64
	x0, x1, y0, y1                 float64
	logY                           bool
}

func (c chart) px(x float64) float64 {
	return c.left + (x-c.x0)/(c.x1-c.x0)*(c.w-c.left-c.right)
}

func (c chart) py(y float64) float64 {
	if c.logY {
		y, c.y0, c.y1 = math.Log10(max(y, 1e-3)), math.Log10(c.y0), math.Log10(c.y1)
	}
	return c.h - c.bottom - (y-c.y0)/(c.y1-c.y0)*(c.h-c.top-c.bottom)
}

func (c chart) frame(b *strings.Builder, title, xlabel, ylabel string) {
	fmt.Fprintf(b, `<svg width="%.0f" height="%.0f" xmlns="http://www.w3.org/2000/svg">`, c.w, c.h)
	fmt.Fprintf(b, `<text x="%.0f" y="14" font-weight="bold">%s</text>`, c.left, html.EscapeString(title))
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#000"/>`, c.left, c.h-c.bottom, c.w-c.right, c.h-c.bottom)
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#000"/>`, c.left, c.top, c.left, c.h-c.bottom)
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`, (c.left+c.w-c.right)/2, c.h-4, html.EscapeString(xlabel))
	fmt.Fprintf(b, `<text x="12" y="%.0f" transform="rotate(-90 12 %.0f)" text-anchor="middle">%s</text>`, (c.top+c.h-c.bottom)/2, (c.top+c.h-c.bottom)/2, html.EscapeString(ylabel))
	if c.logY {
		for e := math.Floor(math.Log10(c.y0)); e <= math.Ceil(math.Log10(c.y1)); e++ {
			v := math.Pow(10, e)
			if v < c.y0 || v > c.y1 {
				continue
			}
			y := c.py(v)
			fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end">%g</text>`, c.left, y, c.w-c.right, y, c.left-3, y+4, v)
		}
	} else {
		for i := 0; i <= 4; i++ {
			v := c.y0 + (c.y1-c.y0)*float64(i)/4
			y := c.py(v)
			fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end">%.3g</text>`, c.left, y, c.w-c.right, y, c.left-3, y+4, v)
		}
	}
}

func legend(b *strings.Builder, c chart, names []string, colours map[string]string) {
	for i, n := range names {
		y := c.top + 12 + float64(i)*14
		fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`, c.w-c.right+6, y-9, colours[n], c.w-c.right+20, y, html.EscapeString(n))
	}
}

func nines(p float64) float64 {
	// 0 → 0, 90 → 1, 99 → 2, 99.9 → 3 …; 100 is drawn just past 99.999.
	if p >= 100 {
		return 5.3
	}
	return -math.Log10(1 - p/100)
}

func spectrumSVG(rep *Report, point string, colours map[string]string) string {
	// Median latency per percentile over the repetitions, per arm.
	curves := map[string][]SpectrumPoint{}
	var names []string
	byArm := map[string][][]SpectrumPoint{}
	for _, r := range rep.Results {
		s := SummaryRow{Mode: r.Mode, Fraction: r.Fraction, Loops: r.Loops, ComputeUS: r.ComputeUS}
		if pointOf(rep, s) != point || len(r.Spectrum) == 0 {
			continue
		}
		if _, ok := byArm[r.Arm]; !ok {
			names = append(names, r.Arm)
		}
		byArm[r.Arm] = append(byArm[r.Arm], r.Spectrum)
	}
	lo, hi := math.Inf(1), 0.0
	for arm, reps := range byArm {
		var curve []SpectrumPoint
		for i := range reps[0] {
			var v []float64
			for _, sp := range reps {
				if i < len(sp) {
					v = append(v, sp[i].LatencyUS)
				}
			}
			l := spreadOf(v).Median
			curve = append(curve, SpectrumPoint{Percentile: reps[0][i].Percentile, LatencyUS: l})
			lo, hi = min(lo, l), max(hi, l)
		}
		curves[arm] = curve
	}
	if len(curves) == 0 {
		return ""
	}
	c := chart{w: 560, h: 300, left: 55, right: 110, top: 24, bottom: 34, x0: 0, x1: 5.3, y0: math.Pow(10, math.Floor(math.Log10(max(lo, 1)))), y1: math.Pow(10, math.Ceil(math.Log10(max(hi, 10)))), logY: true}
	var b strings.Builder
	c.frame(&b, "latency by percentile — "+point, "percentile", "latency µs (log)")
	for i, lab := range []string{"0", "90", "99", "99.9", "99.99", "99.999"} {
		x := c.px(float64(i))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`, x, c.h-c.bottom+13, lab)
	}
	for _, arm := range names {
		var pts []string
		for _, p := range curves[arm] {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.px(nines(p.Percentile)), c.py(p.LatencyUS)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, colours[arm], strings.Join(pts, " "))
	}
	legend(&b, c, names, colours)
	b.WriteString("</svg>\n")
	return b.String()
}

func throughputSVG(rep *Report, colours map[string]string) string {
	var names []string
	hiX, lo, hi := 0.0, math.Inf(1), 0.0
	for _, s := range rep.Summary {
		if !slices.Contains(names, s.Arm) {
			names = append(names, s.Arm)
		}
		hiX = max(hiX, s.AchievedRPS.Max)
		lo, hi = min(lo, s.P99.Median), max(hi, s.P99.Median)
	}
	if len(names) == 0 {
		return ""
	}
	// With no replies anywhere every rate is 0: keep the axis from
	// collapsing to zero width (and every x to NaN).
	c := chart{w: 560, h: 300, left: 55, right: 110, top: 24, bottom: 34, x0: 0, x1: max(hiX*1.05, 1), y0: math.Pow(10, math.Floor(math.Log10(max(lo, 1)))), y1: math.Pow(10, math.Ceil(math.Log10(max(hi, 10)))), logY: true}
	var b strings.Builder
	c.frame(&b, "p99 against achieved throughput (medians)", "req/s", "p99 µs (log)")
	for i := 0; i <= 4; i++ {
		v := c.x1 * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%.0fk</text>`, c.px(v), c.h-c.bottom+13, v/1000)
	}
	for _, arm := range names {
		var pts []SummaryRow
		for _, s := range rep.Summary {
			if s.Arm == arm {
				pts = append(pts, s)
			}
		}
		slices.SortFunc(pts, func(a, b SummaryRow) int {
			if a.AchievedRPS.Median < b.AchievedRPS.Median {
				return -1
			}
			return 1
		})
		var line []string
		for _, s := range pts {
			x, y := c.px(s.AchievedRPS.Median), c.py(s.P99.Median)
			line = append(line, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s %s: %.0f req/s, p99 %.1f µs</title></circle>`, x, y, colours[arm], html.EscapeString(arm), html.EscapeString(pointOf(rep, s)), s.AchievedRPS.Median, s.P99.Median)
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-opacity="0.5" points="%s"/>`, colours[arm], strings.Join(line, " "))
	}
	legend(&b, c, names, colours)
	b.WriteString("</svg>\n")
	return b.String()
}

func cpuSVG(rep *Report, colours map[string]string) string {
	type bar struct {
		label                                  string
		user, sys, irq, soft, poll, steal, srv float64
	}
	var bars []bar
	for _, s := range rep.Summary {
		var u, sy, ir, so, po, st []float64
		for _, r := range rep.Results {
			// Without replies a measurement has no CPU per request.
			if r.Arm == s.Arm && r.Mode == s.Mode && r.Fraction == s.Fraction && r.Loops == s.Loops && r.ComputeUS == s.ComputeUS && r.Requests > 0 {
				// The client's empty polls are user and system time that is
				// not work: shown apart, taken from user and system pro rata.
				m := r.Machine
				keep := 1.0
				if us := m.UserUSPerReq + m.SysUSPerReq; us > 0 {
					keep = max(us-m.ClientPollUSPerReq, 0) / us
				}
				u, sy = append(u, m.UserUSPerReq*keep), append(sy, m.SysUSPerReq*keep)
				ir, so, po = append(ir, m.IRQUSPerReq), append(so, m.SoftirqUSPerReq), append(po, m.ClientPollUSPerReq)
				st = append(st, m.StealUSPerReq)
			}
		}
		bars = append(bars, bar{label: s.Arm + " · " + pointOf(rep, s), user: spreadOf(u).Median, sys: spreadOf(sy).Median,
			irq: spreadOf(ir).Median, soft: spreadOf(so).Median, poll: spreadOf(po).Median, steal: spreadOf(st).Median, srv: s.ServerUSPerReq.Median})
	}
	if len(bars) == 0 {
		return ""
	}
	top := 0.0
	for _, br := range bars {
		top = max(top, br.user+br.sys+br.irq+br.soft+br.poll+br.steal, br.srv)
	}
	rowH := 18.0
	// No CPU per request at all (no replies): a nonzero axis all the same.
	c := chart{w: 900, h: 50 + rowH*float64(len(bars)), left: 230, right: 20, top: 24, bottom: 26, x0: 0, x1: max(top*1.1, 1)}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%.0f" height="%.0f" xmlns="http://www.w3.org/2000/svg">`, c.w, c.h)
	b.WriteString(`<defs><pattern id="steal" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff"/><line x1="0" y1="0" x2="0" y2="6" stroke="#999" stroke-width="3"/></pattern></defs>`)
	parts := []struct{ name, colour string }{{"user", "#4e79a7"}, {"system", "#f28e2b"}, {"irq", "#e15759"}, {"softirq", "#76b7b2"}, {"client polling", "#d3d3d3"}, {"steal", "url(#steal)"}}
	for i, p := range parts {
		fmt.Fprintf(&b, `<rect x="%.0f" y="6" width="10" height="10" fill="%s"/><text x="%.0f" y="15">%s</text>`, c.left+float64(i)*80, p.colour, c.left+float64(i)*80+14, p.name)
	}
	lx := c.left + float64(len(parts))*80
	fmt.Fprintf(&b, `<line x1="%.0f" y1="5" x2="%.0f" y2="17" stroke="#000" stroke-width="2"/><text x="%.0f" y="15">server process (getrusage)</text>`, lx+5, lx+5, lx+12)
	for i, br := range bars {
		y := c.top + float64(i)*rowH
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`, c.left-4, y+12, html.EscapeString(br.label))
		x := c.left
		for j, v := range []float64{br.user, br.sys, br.irq, br.soft, br.poll, br.steal} {
			w := v / c.x1 * (c.w - c.left - c.right)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="%s"><title>%s %.2f µs/req</title></rect>`, x, y+2, w, rowH-4, parts[j].colour, parts[j].name, v)
			x += w
		}
		sx := c.left + br.srv/c.x1*(c.w-c.left-c.right)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#000" stroke-width="2"><title>server process %.2f µs/req</title></line>`, sx, y, sx, y+rowH, br.srv)
	}
	yb := c.h - c.bottom + 14
	for i := 0; i <= 4; i++ {
		v := c.x1 * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%.1f</text>`, c.left+v/c.x1*(c.w-c.left-c.right), yb, v)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">CPU-µs per request</text></svg>`+"\n", (c.left+c.w)/2, c.h-2)
	_ = colours
	return b.String()
}

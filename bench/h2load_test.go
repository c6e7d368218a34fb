package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The outputs in testdata/h2load were captured from h2load 1.52 (nghttp2
// 1.52.0, Debian 12) against a Go net/http h2c server: a clean run (one
// thread, -m 1), two threads with -m 10, every reply 404, every stream
// reset by the server, and nothing listening; summary-tls.txt against a
// Go net/http HTTPS server (TLS 1.3, h2 by ALPN), -n 20 -c 2 -m 2.
func readH2loadTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "h2load", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseH2loadSummary(t *testing.T) {
	for _, tc := range []struct {
		file string
		want H2loadSummary
		ok   bool // verifyH2load passes, with a log of Done 2xx rows
	}{
		{"summary-ok.txt", H2loadSummary{
			Finished: 1300 * time.Millisecond, ReqPerSec: 18577,
			Total: 18577, Started: 18577, Done: 18577, Succeeded: 18577,
			Status:       [4]uint64{18577, 0, 0, 0},
			TrafficTotal: 1597714, TrafficHeaders: 95020, TrafficData: 1516608,
			Protocol: "h2c",
		}, true},
		{"summary-m10-t2.txt", H2loadSummary{
			Finished: 1280 * time.Millisecond, ReqPerSec: 6964,
			Total: 6964, Started: 6984, Done: 6964, Succeeded: 6964,
			Status:       [4]uint64{6964, 0, 0, 0},
			TrafficTotal: 599376, TrafficHeaders: 28084, TrafficData: 445696,
			Protocol: "h2c",
			// Thread #1's warm-up ended as it began: its two connections
			// were made in the main duration.
			ConnectMax: 256 * time.Microsecond,
		}, true},
		{"summary-404.txt", H2loadSummary{
			Finished: 1200 * time.Millisecond, ReqPerSec: 16357,
			Total: 16357, Started: 16357, Done: 16357, Succeeded: 5, Failed: 16352,
			Status:       [4]uint64{0, 0, 16352, 0},
			TrafficTotal: 686970, TrafficHeaders: 97022, TrafficData: 367992,
			Protocol: "h2c",
		}, false},
		{"summary-reset.txt", H2loadSummary{
			Finished: 1200 * time.Millisecond,
			Total:    15362, Started: 15362, Done: 15362, Failed: 15362, Errored: 15362,
			TrafficTotal: 199706,
			Protocol:     "h2c",
		}, false},
		{"summary-refused.txt", H2loadSummary{Finished: 1420 * time.Millisecond}, true}, // no request: noted by the runner
		{"summary-tls.txt", H2loadSummary{
			Finished: 10210 * time.Microsecond, ReqPerSec: 1959.63,
			Total: 20, Started: 20, Done: 20, Succeeded: 20,
			Status:       [4]uint64{20, 0, 0, 0},
			TrafficTotal: 750, TrafficHeaders: 168, TrafficData: 100,
			Protocol: "h2", TLS: H2loadTLS{Version: "TLS 1.3", CipherSuite: "TLS_AES_128_GCM_SHA256"},
			ConnectMax: 5240 * time.Microsecond, // a run of -n requests: no warm-up
		}, true},
		// 20 connections to a server whose TLS handshakes take 50 ms one
		// at a time, with a 200 ms warm-up: most handshook in the main
		// duration, the last 860 ms into it.
		{"summary-tls-connect-late.txt", H2loadSummary{
			Finished: 1230 * time.Millisecond, ReqPerSec: 3558,
			Total: 3558, Started: 3575, Done: 3558, Succeeded: 3558,
			Status:       [4]uint64{3558, 0, 0, 0},
			TrafficTotal: 98311, TrafficHeaders: 16646, TrafficData: 19075,
			Protocol: "h2", TLS: H2loadTLS{Version: "TLS 1.3", CipherSuite: "TLS_AES_128_GCM_SHA256"},
			ConnectMax: 860460 * time.Microsecond,
		}, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ParseH2loadSummary(readH2loadTestdata(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			err = verifyH2load(got, H2loadLog{Requests: got.Done, OK: got.Done})
			if (err == nil) != tc.ok {
				t.Fatalf("verifyH2load: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestParseH2loadSummaryErrors(t *testing.T) {
	ok := "requests: 1 total, 1 started, 1 done, 1 succeeded, 0 failed, 0 errored, 0 timeout\nstatus codes: 1 2xx, 0 3xx, 0 4xx, 0 5xx\n"
	for name, in := range map[string]string{
		"empty":            "",
		"no status line":   "requests: 1 total, 1 started, 1 done, 1 succeeded, 0 failed, 0 errored, 0 timeout\n",
		"no requests line": "status codes: 1 2xx, 0 3xx, 0 4xx, 0 5xx\n",
		"a count missing":  "requests: 1 total, 1 started, 1 done, 1 succeeded, 0 failed, 0 errored\nstatus codes: 1 2xx, 0 3xx, 0 4xx, 0 5xx\n",
		"names swapped":    "requests: 1 total, 1 done, 1 started, 1 succeeded, 0 failed, 0 errored, 0 timeout\nstatus codes: 1 2xx, 0 3xx, 0 4xx, 0 5xx\n",
		"negative count":   "requests: -1 total, 1 started, 1 done, 1 succeeded, 0 failed, 0 errored, 0 timeout\nstatus codes: 1 2xx, 0 3xx, 0 4xx, 0 5xx\n",
		"bad finished":     "finished in soon, 1.00 req/s, 1B/s\n" + ok,
		"negative rate":    "finished in 1s, -1.00 req/s, 1B/s\n" + ok,
		"traffic cut":      "traffic: 1B (1) total, 0B (0) headers (space savings 0.00%)\n" + ok,
	} {
		if _, err := ParseH2loadSummary([]byte(in)); err == nil {
			t.Errorf("%s: parsed %q", name, in)
		}
	}
}

func TestVerifyH2load(t *testing.T) {
	good := H2loadSummary{Total: 10, Started: 10, Done: 10, Succeeded: 10, Status: [4]uint64{10, 0, 0, 0}}
	goodLog := H2loadLog{Requests: 10, OK: 10}
	for _, tc := range []struct {
		name string
		s    func(*H2loadSummary)
		l    func(*H2loadLog)
		ok   bool
	}{
		{"clean", nil, nil, true},
		{"a row without a status, counted 2xx", nil, func(l *H2loadLog) { l.OK, l.Unrecorded = 9, 1 }, true},
		{"a row without a status, not counted", func(s *H2loadSummary) { s.Status[0] = 9 }, func(l *H2loadLog) { l.OK, l.Unrecorded = 9, 1 }, true},
		{"2xx short", func(s *H2loadSummary) { s.Status[0] = 9 }, nil, false},
		{"nothing done (noted, not failed)", func(s *H2loadSummary) { *s = H2loadSummary{} }, func(l *H2loadLog) { *l = H2loadLog{} }, true},
		{"nothing done but a failure", func(s *H2loadSummary) { *s = H2loadSummary{Done: 1, Failed: 1, Errored: 1} }, func(l *H2loadLog) { *l = H2loadLog{Requests: 1, Failed: 1} }, false},
		{"one failed", func(s *H2loadSummary) { s.Failed, s.Succeeded = 1, 9 }, nil, false},
		{"one errored", func(s *H2loadSummary) { s.Errored = 1 }, nil, false},
		{"one timed out", func(s *H2loadSummary) { s.Timeout = 1 }, nil, false},
		{"one 3xx", func(s *H2loadSummary) { s.Status = [4]uint64{9, 1, 0, 0} }, nil, false},
		{"one 5xx", func(s *H2loadSummary) { s.Status = [4]uint64{9, 0, 0, 1} }, nil, false},
		{"log short", nil, func(l *H2loadLog) { l.Requests, l.OK = 9, 9 }, false},
		{"log row failed", nil, func(l *H2loadLog) { l.OK, l.Failed = 9, 1 }, false},
		{"log row 404", nil, func(l *H2loadLog) { l.OK, l.Other = 9, 1 }, false},
	} {
		s, l := good, goodLog
		if tc.s != nil {
			tc.s(&s)
		}
		if tc.l != nil {
			tc.l(&l)
		}
		if err := verifyH2load(s, l); (err == nil) != tc.ok {
			t.Errorf("%s: verifyH2load = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestParseH2loadLog(t *testing.T) {
	for _, tc := range []struct {
		file string
		want H2loadLog
	}{
		{"log-ok.tsv", H2loadLog{Requests: 12, OK: 11, Unrecorded: 1, FirstEndUS: 1796150892529094, LastEndUS: 1796150892529699}},
		{"log-404.tsv", H2loadLog{Requests: 9, Other: 6, Unrecorded: 3, FirstEndUS: 1796150963451205, LastEndUS: 1796150964448188}},
		{"log-reset.tsv", H2loadLog{Requests: 6, Failed: 6, FirstEndUS: 1796150964729657, LastEndUS: 1796150964730341}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			h := NewHistogram()
			got, err := ParseH2loadLog(bytes.NewReader(readH2loadTestdata(t, tc.file)), h)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			if h.Count() != int64(got.Requests) {
				t.Fatalf("histogram has %d values for %d rows", h.Count(), got.Requests)
			}
		})
	}
	// The percentiles are the rows' durations.
	h := NewHistogram()
	var in strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&in, "%d\t200\t%d\n", 1796150892528441+i, i)
	}
	if _, err := ParseH2loadLog(strings.NewReader(in.String()), h); err != nil {
		t.Fatal(err)
	}
	near := func(got, want time.Duration) bool { return got >= want && got <= want+want/1000 } // 3 digits
	if p50, p99 := h.Quantile(50), h.Quantile(99); !near(p50, 500*time.Microsecond) || !near(p99, 990*time.Microsecond) {
		t.Fatalf("p50 %v p99 %v, want 500µs and 990µs", p50, p99)
	}
	for _, bad := range []string{"1\t200\n", "1 200 3\n", "x\t200\t3\n", "1\t1000\t3\n", "1\t-2\t3\n", "-1\t200\t3\n", "1\t200\t-1\n", "1\t200\t99999999999999999999\n"} {
		if _, err := ParseH2loadLog(strings.NewReader(bad), nil); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
	// A later version's extra columns are ignored.
	if l, err := ParseH2loadLog(strings.NewReader("5\t200\t3\t77\n"), nil); err != nil || l.OK != 1 {
		t.Errorf("extra column: %+v, %v", l, err)
	}
}

func TestParseH2loadRowAllocs(t *testing.T) {
	row := []byte("1796150892528459\t200\t635")
	if n := testing.AllocsPerRun(100, func() { parseH2loadRow(row) }); n != 0 {
		t.Fatalf("%v allocations per row", n)
	}
}

// formatH2loadSummary writes s as h2load would, less the lines the parser
// skips.
func formatH2loadSummary(s H2loadSummary) []byte {
	var tls []byte
	for _, l := range []struct{ name, v string }{{"TLS Protocol", s.TLS.Version}, {"Cipher", s.TLS.CipherSuite}, {"Application protocol", s.Protocol}} {
		if l.v != "" {
			tls = fmt.Appendf(tls, "%s: %s\n", l.name, l.v)
		}
	}
	return fmt.Appendf(tls, "finished in %s, %s req/s, 0B/s\n"+
		"requests: %d total, %d started, %d done, %d succeeded, %d failed, %d errored, %d timeout\n"+
		"status codes: %d 2xx, %d 3xx, %d 4xx, %d 5xx\n"+
		"traffic: 0B (%d) total, 0B (%d) headers (space savings 0.00%%), 0B (%d) data\n"+
		"time for connect:    0us    %s    0us    0us    0.00%%\n",
		s.Finished, strconv.FormatFloat(s.ReqPerSec, 'f', -1, 64), s.Total, s.Started, s.Done, s.Succeeded, s.Failed, s.Errored, s.Timeout,
		s.Status[0], s.Status[1], s.Status[2], s.Status[3], s.TrafficTotal, s.TrafficHeaders, s.TrafficData, s.ConnectMax)
}

func FuzzH2loadSummary(f *testing.F) {
	for _, n := range []string{"summary-ok.txt", "summary-m10-t2.txt", "summary-404.txt", "summary-reset.txt", "summary-refused.txt", "summary-tls.txt", "summary-tls-connect-late.txt"} {
		f.Add(readH2loadTestdata(f, n))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := ParseH2loadSummary(in)
		if err != nil {
			return
		}
		// What parses, written out again, parses the same.
		again, err := ParseH2loadSummary(formatH2loadSummary(s))
		if err != nil {
			t.Fatalf("%+v written out does not parse: %v", s, err)
		}
		if again != s {
			t.Fatalf("round trip: %+v, then %+v", s, again)
		}
	})
}

func FuzzH2loadLog(f *testing.F) {
	for _, n := range []string{"log-ok.tsv", "log-404.tsv", "log-reset.tsv"} {
		f.Add(readH2loadTestdata(f, n))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h := NewHistogram()
		l, err := ParseH2loadLog(bytes.NewReader(in), h)
		if err != nil {
			return
		}
		if l.OK+l.Failed+l.Other+l.Unrecorded != l.Requests || h.Count() != int64(l.Requests) || l.FirstEndUS > l.LastEndUS {
			t.Fatalf("inconsistent: %+v, histogram %d", l, h.Count())
		}
		// Each row, written out again, parses the same.
		for line := range bytes.Lines(in) {
			line = bytes.TrimRight(line, "\r\n")
			if len(line) == 0 {
				continue
			}
			start, status, dur, err := parseH2loadRow(line)
			if err != nil {
				t.Fatalf("row %q of a log that parsed: %v", line, err)
			}
			s2, st2, d2, err := parseH2loadRow(fmt.Appendf(nil, "%d\t%d\t%d", start, status, dur))
			if err != nil || s2 != start || st2 != status || d2 != dur {
				t.Fatalf("row %q: round trip %d %d %d %v", line, s2, st2, d2, err)
			}
		}
	})
}

// TestH2loadConnectNote: a measurement whose h2load made connections in
// its main duration (a handshake still running when the warm-up ended,
// H2loadSummary.ConnectMax) is noted; one whose connections were all
// made in the warm-up is not.
func TestH2loadConnectNote(t *testing.T) {
	sum, err := ParseH2loadSummary(readH2loadTestdata(t, "summary-tls-connect-late.txt"))
	if err != nil {
		t.Fatal(err)
	}
	late := h2loadMeasure{connectMax: sum.ConnectMax}.connectNote("spindle streams 1 rep 1")
	if !strings.Contains(late, "spindle streams 1 rep 1: h2load made connections in the window") || !strings.Contains(late, "860.5 ms") {
		t.Errorf("late connections: note %q", late)
	}
	sum, err = ParseH2loadSummary(readH2loadTestdata(t, "summary-ok.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if n := (h2loadMeasure{connectMax: sum.ConnectMax}).connectNote("direct streams 1 rep 1"); n != "" {
		t.Errorf("connections made in the warm-up: note %q", n)
	}
}

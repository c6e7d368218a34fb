package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// h2load (nghttp2's HTTP/2 load generator) drives `spindle bench http2`.
// This file reads what it writes: its summary on stdout and its per-request
// log file (--log-file). Both formats are h2load 1.52's; testdata/h2load
// holds outputs captured from it.

// H2loadSummary is what h2load's summary on stdout says about a run. In a
// timing-based run (-D) the request and status counts are those of the
// main duration; the traffic counts include the warm-up.
type H2loadSummary struct {
	// Finished is the run's time ("finished in 1.30s"), warm-up
	// included; ReqPerSec its rate, the main duration's requests over
	// the main duration.
	Finished  time.Duration
	ReqPerSec float64
	// The requests line: total, started, done, succeeded, failed, errored,
	// timeout. Succeeded counts the streams that closed cleanly and whose
	// status was 2xx or 3xx; failed those that did not (errored ones and
	// 4xx or 5xx replies included).
	Total, Started, Done, Succeeded, Failed, Errored, Timeout uint64
	// Status counts the replies by class: Status[0] 2xx … Status[3] 5xx.
	Status [4]uint64
	// The traffic line, in bytes: everything read, the header blocks
	// (HPACK-compressed, as received), the DATA payloads.
	TrafficTotal, TrafficHeaders, TrafficData uint64
	// Protocol is the application protocol of h2load's first connection
	// ("Application protocol: h2"; "h2c" without TLS).
	Protocol string
	// TLS is what h2load says of TLS, with an https URI; zero without.
	TLS H2loadTLS
	// ConnectMax is the max column of the "time for connect" line. In a
	// timing-based run h2load clears every connection's connect time when
	// its main duration starts, so it is 0 unless a connection was made
	// (TCP connect and, with TLS, the handshake) in the main duration: one
	// not yet made when the warm-up ended, timed from the main duration's
	// start, or a reconnect.
	ConnectMax time.Duration
}

// H2loadTLS is what h2load's summary says its first connection's TLS
// handshake agreed: its lines "TLS Protocol: TLSv1.3" and "Cipher:
// TLS_AES_256_GCM_SHA384".
type H2loadTLS struct {
	// Version is the protocol as crypto/tls names it ("TLS 1.3" for
	// OpenSSL's "TLSv1.3"), CipherSuite OpenSSL's name for the cipher
	// suite (for TLS 1.3 the RFC's, as crypto/tls's).
	Version, CipherSuite string
}

// errNoSummary is h2load output without its summary's requests or status
// line (it failed before it measured).
var errNoSummary = errors.New("no requests or status codes line in h2load's output")

// ParseH2loadSummary reads h2load's stdout. It needs the requests and
// status codes lines; the finished and traffic lines are read when
// present. Any goroutine.
func ParseH2loadSummary(out []byte) (H2loadSummary, error) {
	var s H2loadSummary
	var haveReq, haveStatus bool
	for len(out) > 0 {
		line := out
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			out = nil
		}
		line = bytes.TrimSpace(line)
		var err error
		switch {
		case cutPrefix(&line, "finished in "):
			err = s.parseFinished(line)
		case cutPrefix(&line, "requests: "):
			err = parseCounts(line, []string{"total", "started", "done", "succeeded", "failed", "errored", "timeout"},
				[]*uint64{&s.Total, &s.Started, &s.Done, &s.Succeeded, &s.Failed, &s.Errored, &s.Timeout})
			haveReq = true
		case cutPrefix(&line, "status codes: "):
			err = parseCounts(line, []string{"2xx", "3xx", "4xx", "5xx"}, []*uint64{&s.Status[0], &s.Status[1], &s.Status[2], &s.Status[3]})
			haveStatus = true
		case cutPrefix(&line, "traffic: "):
			err = s.parseTraffic(line)
		case cutPrefix(&line, "TLS Protocol: "):
			s.TLS.Version = string(line)
			if v, ok := strings.CutPrefix(s.TLS.Version, "TLSv"); ok {
				s.TLS.Version = "TLS " + v
			}
		case cutPrefix(&line, "Cipher: "):
			s.TLS.CipherSuite = string(line)
		case cutPrefix(&line, "Application protocol: "):
			s.Protocol = string(line)
		case cutPrefix(&line, "time for connect:"):
			err = s.parseConnect(line)
		}
		if err != nil {
			return s, fmt.Errorf("h2load summary: %w", err)
		}
	}
	if !haveReq || !haveStatus {
		return s, errNoSummary
	}
	return s, nil
}

// verifyH2load returns an error unless every request of the run, as its
// summary s and its log l say, was answered 2xx on a stream that closed
// cleanly: none failed, errored or timed out, none had another status, and
// the log has a row for each request done. A run that finished no request
// passes (a starved server or client: the report notes it). A row
// without a status (Unrecorded: at most the requests in flight when the
// main duration started) counts as 2xx when the summary's 2xx count is
// short of it; the summary's failed count, which a non-2xx status raises,
// still covers it.
func verifyH2load(s H2loadSummary, l H2loadLog) error {
	other := s.Status[1] + s.Status[2] + s.Status[3]
	switch {
	case s.Failed > 0 || s.Errored > 0 || s.Timeout > 0 || other > 0 || s.Succeeded != s.Done || s.Status[0]+l.Unrecorded < s.Done:
		return fmt.Errorf("h2load: %d requests done, %d succeeded, %d failed, %d errored, %d timed out; status codes %d 2xx, %d 3xx, %d 4xx, %d 5xx",
			s.Done, s.Succeeded, s.Failed, s.Errored, s.Timeout, s.Status[0], s.Status[1], s.Status[2], s.Status[3])
	case l.Requests != s.Done:
		return fmt.Errorf("h2load's log has %d rows for the %d requests its summary says were done", l.Requests, s.Done)
	case l.Failed > 0 || l.Other > 0:
		return fmt.Errorf("h2load's log has %d failed streams and %d replies of another status than 2xx", l.Failed, l.Other)
	}
	return nil
}

// cutPrefix removes prefix from *b and reports whether it was there.
func cutPrefix(b *[]byte, prefix string) bool {
	if !bytes.HasPrefix(*b, []byte(prefix)) {
		return false
	}
	*b = (*b)[len(prefix):]
	return true
}

// parseFinished reads "1.30s, 18577.00 req/s, 1.52MB/s".
func (s *H2loadSummary) parseFinished(line []byte) error {
	f := bytes.Split(line, []byte(", "))
	if len(f) < 2 || !bytes.HasSuffix(f[1], []byte(" req/s")) {
		return fmt.Errorf("finished line %q", line)
	}
	d, err := time.ParseDuration(string(f[0]))
	if err != nil || d < 0 {
		return fmt.Errorf("finished line %q: bad duration", line)
	}
	rate, err := strconv.ParseFloat(string(bytes.TrimSuffix(f[1], []byte(" req/s"))), 64)
	if err != nil || !(rate >= 0) {
		return fmt.Errorf("finished line %q: bad rate", line)
	}
	s.Finished, s.ReqPerSec = d, rate
	return nil
}

// parseConnect reads the columns of the "time for connect" line after its
// name ("15.87ms    860.46ms    442.04ms    265.61ms    58.82%": min, max,
// mean, sd, share within a sd) into ConnectMax.
func (s *H2loadSummary) parseConnect(line []byte) error {
	f := bytes.Fields(line)
	if len(f) != 5 {
		return fmt.Errorf("time for connect line %q: want 5 columns", line)
	}
	d, err := time.ParseDuration(string(f[1]))
	if err != nil || d < 0 {
		return fmt.Errorf("time for connect line %q: bad max", line)
	}
	s.ConnectMax = d
	return nil
}

// parseCounts reads a line of "N name" items separated by ", ", which must
// be names, in order, into dst.
func parseCounts(line []byte, names []string, dst []*uint64) error {
	f := bytes.Split(line, []byte(", "))
	if len(f) != len(names) {
		return fmt.Errorf("%q: want %d counts", line, len(names))
	}
	for i, item := range f {
		num, name, ok := bytes.Cut(item, []byte(" "))
		if !ok || string(name) != names[i] {
			return fmt.Errorf("%q: want %q as item %d", line, names[i], i+1)
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return fmt.Errorf("%q: bad count %q", line, num)
		}
		*dst[i] = v
	}
	return nil
}

// parseTraffic reads "1.52MB (1597714) total, 92.79KB (95020) headers
// (space savings 95.05%), 1.45MB (1516608) data": the exact byte counts,
// in parentheses, before each name.
func (s *H2loadSummary) parseTraffic(line []byte) error {
	dst := []*uint64{&s.TrafficTotal, &s.TrafficHeaders, &s.TrafficData}
	names := []string{"total", "headers", "data"}
	rest := line
	for i, name := range names {
		_, after, ok := bytes.Cut(rest, []byte("("))
		num, tail, ok2 := bytes.Cut(after, []byte(") "))
		if !ok || !ok2 || !bytes.HasPrefix(tail, []byte(name)) {
			return fmt.Errorf("traffic line %q: want the %s bytes", line, name)
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return fmt.Errorf("traffic line %q: bad count %q", line, num)
		}
		*dst[i] = v
		rest = tail[len(name):]
		if i < len(names)-1 {
			// The headers item has a parenthesis of its own after its
			// name: the next item starts after the ", " that ends it.
			var found bool
			if _, rest, found = bytes.Cut(rest, []byte(", ")); !found {
				return fmt.Errorf("traffic line %q: want the %s bytes", line, names[i+1])
			}
		}
	}
	return nil
}

// H2loadLog is what h2load's per-request log file (--log-file) says: one
// row per request that ended in the main duration.
type H2loadLog struct {
	// Requests is the number of rows; OK those with a 2xx status.
	Requests, OK uint64
	// Failed counts the rows of failed streams (status -1); Other those
	// with a status that is not 2xx.
	Failed, Other uint64
	// Unrecorded counts the rows with status 0: requests whose status
	// h2load counted in its warm-up, before the main duration reset the
	// rows, so that the row has no status; the summary's status counts
	// have them.
	Unrecorded uint64
	// FirstEndUS and LastEndUS are the earliest and latest times a
	// response ended (start plus duration), µs since the epoch: about the
	// main duration's edges, on the wall clock.
	FirstEndUS, LastEndUS int64
}

// ParseH2loadLog reads an h2load log file from r, recording each row's
// duration into h (when h is not nil). Rows are "start µs, status, duration
// µs", tab-separated; more columns, which later versions may add, are
// ignored. Any goroutine; h is the caller's.
func ParseH2loadLog(r io.Reader, h *Histogram) (H2loadLog, error) {
	return parseH2loadLog(r, h, nil)
}

// parseH2loadLog is ParseH2loadLog that also counts the rows by the
// millisecond their response ended in into ends (when not nil), so that
// CPU read at other times than the main duration's edges is divided by
// the requests between its reads (windowRate).
func parseH2loadLog(r io.Reader, h *Histogram, ends *replyTimes) (H2loadLog, error) {
	var l H2loadLog
	endMS := map[int64]uint64{}
	sc := bufio.NewScanner(r)
	row := 0
	for sc.Scan() {
		row++
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		start, status, dur, err := parseH2loadRow(line)
		if err != nil {
			return l, fmt.Errorf("h2load log row %d: %w", row, err)
		}
		end := start + dur // each below 10^18: no overflow
		if l.Requests == 0 || end < l.FirstEndUS {
			l.FirstEndUS = end
		}
		l.LastEndUS = max(l.LastEndUS, end)
		if ends != nil {
			endMS[end/1000]++
		}
		l.Requests++
		switch {
		case status >= 200 && status < 300:
			l.OK++
		case status == -1:
			l.Failed++
		case status == 0:
			l.Unrecorded++
		default:
			l.Other++
		}
		if h != nil {
			// Past the histogram's minute it counts as overflow; the
			// clamp keeps a huge µs count from overflowing a Duration.
			h.Record(time.Duration(min(dur, histHighest/1e3+1)) * time.Microsecond)
		}
	}
	if err := sc.Err(); err != nil {
		return l, fmt.Errorf("h2load log: %w", err)
	}
	if ends != nil && l.Requests > 0 {
		first := l.FirstEndUS / 1000
		*ends = replyTimes{origin: time.UnixMilli(first), perMS: make([]uint64, l.LastEndUS/1000-first+1)}
		for ms, n := range endMS {
			ends.perMS[ms-first] = n
		}
	}
	return l, nil
}

// parseH2loadRow parses one log row without allocating.
func parseH2loadRow(line []byte) (startUS int64, status int, durUS int64, err error) {
	var f [3][]byte
	rest := line
	for i := range f {
		var ok bool
		f[i], rest, ok = bytes.Cut(rest, []byte("\t"))
		if !ok && i < len(f)-1 {
			return 0, 0, 0, fmt.Errorf("%q: want three tab-separated columns", line)
		}
	}
	if startUS, err = parseLogInt(f[0], 0); err != nil {
		return 0, 0, 0, err
	}
	st, err := parseLogInt(f[1], -1)
	if err != nil || st > 999 {
		return 0, 0, 0, fmt.Errorf("%q: bad status", line)
	}
	if durUS, err = parseLogInt(f[2], 0); err != nil {
		return 0, 0, 0, fmt.Errorf("%q: bad duration", line)
	}
	return startUS, int(st), durUS, nil
}

// parseLogInt parses a decimal integer of at least least; only -1 may be
// negative.
func parseLogInt(b []byte, least int64) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, fmt.Errorf("bad number %q", b)
	}
	var v int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("bad number %q", b)
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	if v < least {
		return 0, fmt.Errorf("bad number %q", b)
	}
	return v, nil
}

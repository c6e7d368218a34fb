package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunProxyTLSHandshakes runs `spindle bench proxy --tls-handshakes`
// and --tls-resume with every arm (the spindle ones are this test binary
// as the proxy, as in TestRunProxyTLS) for a short run in the tcp and
// http protocols: in every measurement of every arm that ran, the clients
// made connections, each one TLS 1.3 with the protocol's ALPN and the one
// cipher suite, every one a full handshake (none resumed) with
// --tls-handshakes, and with --tls-resume all resumed but at most one a
// slot (the run itself fails a measurement whose clients saw otherwise,
// so this checks that the report carries it), with a ticket read for
// each resumed one; the client closed first: TIME_WAIT sockets on the
// client's side of the connections to the proxy, none on the proxy's.
// The report says so in its title, TLS line and notes. haproxy or nginx
// not installed skips its check with the package to install; one
// skipped though installed fails.
func TestRunProxyTLSHandshakes(t *testing.T) {
	skipUnlessLinux(t)
	for _, protocol := range []string{ProxyProtocolTCP, ProxyProtocolHTTP} {
		for _, resume := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/resume=%v", protocol, resume), func(t *testing.T) {
				argv, env := testChildCommand()
				const conns = 4
				run := func(arms []string, d time.Duration) (*ProxyReport, error) {
					return RunProxy(context.Background(), ProxyConfig{
						Protocol: protocol, TLSHandshakes: !resume, TLSResume: resume, Arms: arms, Duration: d, Reps: 1, Conns: conns,
						UpstreamCommand: argv, ProxyCommand: []string{"env", proxyChildEnv + "=1", os.Args[0]}, Env: env,
					})
				}
				rep, err := run(nil, 2*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if c := rep.Config; !c.TLS || !c.TLSHandshakes || c.TLSResume != resume || len(rep.Arms) != len(ProxyArms)-1 {
					t.Fatalf("report: settings %+v, arms %+v", c, rep.Arms)
				}
				md := ProxyMarkdown(rep)
				kind := "full"
				if resume {
					kind = "resumed"
				}
				for _, want := range []string{"a connection and a " + kind + " handshake per request\n", "| arm | handshakes/s |", "- sockets gone into TIME_WAIT during a measurement"} {
					if !strings.Contains(md, want) {
						t.Errorf("markdown has no %q:\n%s", want, md)
					}
				}
				if !slices.Contains(rep.Notes, proxyHandshakeNote(resume)) || !slices.Contains(rep.Notes, proxyChurnNote(tcpSysctls("/"))) {
					t.Errorf("notes lack the handshake ones: %q", rep.Notes)
				}
				alpn := strings.Join(proxyALPN(protocol), ", ")
				eachArm(t, rep, func(t *testing.T, arm string, results []ProxyResult) {
					results = answeredAlone(t, rep, arm, results, run)
					for _, res := range results {
						hs := res.TLS
						if hs == nil || res.TimeWait == nil {
							t.Fatalf("rep %d: TLS %+v, TIME_WAIT %+v", res.Rep, hs, res.TimeWait)
						}
						if hs.Version != "TLS 1.3" || hs.CipherSuite != proxyTLSCipher || hs.ALPN != alpn || hs.Handshakes == 0 || res.Requests == 0 {
							t.Errorf("rep %d: TLS %+v (%d replies in the window), want TLS 1.3 %s %q on every connection", res.Rep, hs, res.Requests, proxyTLSCipher, alpn)
						}
						switch full := hs.Handshakes - hs.Resumed; {
						case !resume && (hs.Resumed != 0 || hs.Tickets != 0):
							t.Errorf("rep %d: %d of %d connections resumed, %d tickets kept, with resumption off", res.Rep, hs.Resumed, hs.Handshakes, hs.Tickets)
						case resume && (full > conns || hs.Tickets < hs.Resumed):
							t.Errorf("rep %d: %d of %d connections full handshakes (at most %d), %d tickets", res.Rep, full, hs.Handshakes, conns, hs.Tickets)
						}
						if tw := res.TimeWait; tw.ClientSide == 0 || tw.ProxySide != 0 {
							t.Errorf("rep %d: TIME_WAIT %+v: want some on the client's side, none on the proxy's", res.Rep, tw)
						}
					}
				})
			})
		}
	}
}

// TestHandshakeLatencyEndsAtReply: --tls-handshakes documents its
// latency as "from the connect to the verified reply" (runHandshakes' doc,
// proxyHandshakeNote). The server here answers each request at once and
// closes its side closeDelay after the client's close_notify and FIN: the
// time the client then spends in closeFirst, waiting for the server's
// end, is after the verified reply and must not be in the latency (nor
// decide in which window a reply counts).
func TestHandshakeLatencyEndsAtReply(t *testing.T) {
	skipUnlessLinux(t)
	const closeDelay = 100 * time.Millisecond
	addr, pool := startTLSEcho(t, closeDelay)
	base := proxyClientTLS(pool, nil)
	res, _, err := runHandshakes(context.Background(), handshakeLoad{
		addr: addr, tls: handshakeClientTLS(base, false),
		framing: LoadConfig{Addr: addr, Payload: DefaultPayload},
		slots:   1, cpus: []int{1}, warmup: 200 * time.Millisecond, window: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Hist.Percentiles()
	t.Logf("%d connections in the window, %.0f/s; latency p50 %.1f ms, p99 %.1f ms", res.Replies, res.Throughput(), p.P50/1e3, p.P99/1e3)
	if p.P50 >= float64(closeDelay/time.Microsecond) {
		t.Errorf("latency p50 %.1f ms: connect-to-reply includes the %v the server took to close after the reply (closeFirst)", p.P50/1e3, closeDelay)
	}
}

// TestHandshakeCPUDividesByTheRepliesBetweenItsReads: as a load's, a
// handshake load's counters are divided by the replies received between
// their own reads. The proxy's CPU read 0.5 s after a 0.5 s window, when
// the load has stopped, is 0.5 s of CPU for the replies of the window:
// divided by the window's rate over 1 s it read half the CPU per
// request the proxy spent.
func TestHandshakeCPUDividesByTheRepliesBetweenItsReads(t *testing.T) {
	skipUnlessLinux(t)
	addr, pool := startTLSEcho(t, 0)
	var start, end time.Time
	res, _, err := runHandshakes(context.Background(), handshakeLoad{
		addr: addr, tls: handshakeClientTLS(proxyClientTLS(pool, nil), false),
		framing: LoadConfig{Addr: addr, Payload: DefaultPayload},
		slots:   1, cpus: []int{1}, warmup: 100 * time.Millisecond, window: 500 * time.Millisecond,
		Window: func(s, e time.Time) { start, end = s, e },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replies < 10 {
		t.Skipf("%d connections in the window: too few to tell the rates apart", res.Replies)
	}
	a := cpuEdge{g: GroupCPU{}, at: start}
	b := cpuEdge{g: GroupCPU{Ticks: uint64(500 * time.Millisecond / time.Duration(ClockTick))}, at: end.Add(500 * time.Millisecond)}
	// The connection begun before the window's end and answered after
	// it is between the reads too: a reply more, within the margin.
	want := 500e3 / float64(res.Replies)
	if us, _, _ := proxyCPU(a, b, res.rate()); math.Abs(us-want) > want*0.15 {
		t.Errorf("%.1f µs/req for 0.5 s of CPU over %d replies, want %.1f", us, res.Replies, want)
	}
}

// startTLSEcho starts a TLS 1.3 server on a loopback port for the
// handshake load: it answers each connection's request at once with the
// request's bytes (the RPC echo) and closes its side closeDelay after the
// client's close_notify and FIN. It returns the address and the pool
// that trusts its certificate; the server stops when t ends.
func startTLSEcho(t *testing.T, closeDelay time.Duration) (string, *x509.CertPool) {
	t.Helper()
	cert, pool := testCertPair(t)
	ln, err := tls.Listen("tcp4", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { ln.Close() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, FrameHeader+DefaultPayload)
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				c.Write(buf)           // the reply, at once
				io.Copy(io.Discard, c) // until the client's close_notify / FIN
				time.Sleep(closeDelay) // then the close, as slow as asked
				c.(*tls.Conn).CloseWrite()
			})
		}
	})
	return ln.Addr().String(), pool
}

// answeredAlone returns arm's results in rep, or, where one got no
// replies in its window, its results measured again alone, for 1 s then
// 2 s (run), until each got replies. On a loaded machine a window of the
// short run (2 s over every arm: about 0.3 s each) can pass with the
// proxy, the upstream or the client's handshake slots starved of the CPU
// (a TLS handshake is milliseconds of it, under the race detector), and
// the report must say so of it; the arm measured alone for longer must
// then answer. One that never answers fails.
func answeredAlone(t *testing.T, rep *ProxyReport, arm string, results []ProxyResult, run func(arms []string, d time.Duration) (*ProxyReport, error)) []ProxyResult {
	t.Helper()
	for d := time.Second; ; d *= 2 {
		var starved []string
		for _, res := range results {
			if res.Requests > 0 {
				continue
			}
			what := fmt.Sprintf("%s rep %d", res.Arm, res.Rep)
			starved = append(starved, what)
			if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, what+" got no replies in its ") }) {
				t.Errorf("%s got no replies, and the notes do not say so: %q", what, rep.Notes)
			}
		}
		if starved == nil {
			return results
		}
		if t.Failed() || d > 2*time.Second {
			t.Fatalf("%s without replies, measured alone up to %v", strings.Join(starved, ", "), d/2)
		}
		t.Logf("%s without replies (a starved machine): measuring %s alone for %v", strings.Join(starved, ", "), arm, d)
		var err error
		if rep, err = run([]string{arm}, d); err != nil {
			t.Fatal(err)
		}
		results = slices.DeleteFunc(slices.Clone(rep.Results), func(r ProxyResult) bool { return r.Arm != arm })
		if len(results) == 0 {
			t.Fatalf("alone: no measurement of %s", arm)
		}
	}
}

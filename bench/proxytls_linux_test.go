package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRunProxyTLS runs `spindle bench proxy --tls` with every arm (the
// spindle ones are this test binary as the proxy, as in TestRunProxyH2)
// for a short run in the tcp and http protocols (the load generator's
// crypto/tls clients) and h2 (h2load over https): every arm that ran
// answered over TLS, as its clients saw it in every measurement (TLS 1.3,
// the protocol's ALPN, a cipher suite, and with the load generator one
// handshake per connection: the run itself fails a measurement whose
// clients saw otherwise, so this checks that the report carries it); the
// report says TLS in its settings, title and TLS line, and has no direct
// arm, with the note saying why. haproxy or nginx not installed skips its
// check with the package to install; one skipped though installed fails.
func TestRunProxyTLS(t *testing.T) {
	skipUnlessLinux(t)
	for _, tc := range []struct{ protocol, title string }{
		{ProxyProtocolTCP, "# spindle bench proxy report: L4 TCP proxies (RPC echo), TLS 1.3 on the client side"},
		{ProxyProtocolHTTP, "# spindle bench proxy report: HTTP/1.1 reverse proxies (keep-alive POSTs, echoed), TLS 1.3 on the client side"},
		{ProxyProtocolH2, "# spindle bench proxy report: HTTP/2 clients (TLS 1.3, h2 by ALPN) under h2load"},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			var streams []int
			if h2Clients(tc.protocol) {
				needH2load(t)
				streams = []int{2}
			}
			argv, env := testChildCommand()
			const conns = 4
			rep, err := RunProxy(context.Background(), ProxyConfig{
				Protocol: tc.protocol, TLS: true, Streams: streams, Duration: 2 * time.Second, Reps: 1, Conns: conns,
				UpstreamCommand: argv, ProxyCommand: []string{"env", proxyChildEnv + "=1", os.Args[0]}, Env: env,
			})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Config.TLS || len(rep.Arms) != len(ProxyArms)-1 || slices.ContainsFunc(rep.Arms, func(a ArmInfo) bool { return a.Name == ProxyArmDirect }) {
				t.Fatalf("report: tls %v, arms %+v", rep.Config.TLS, rep.Arms)
			}
			if !slices.Contains(rep.Notes, proxyTLSNoDirect) || !slices.Contains(rep.Notes, proxyTLSNote(h2Clients(tc.protocol))) {
				t.Errorf("notes lack the TLS ones: %q", rep.Notes)
			}
			md := ProxyMarkdown(rep)
			if !strings.HasPrefix(md, tc.title) || !strings.Contains(md, "- TLS 1.3 on the client side, ") {
				t.Errorf("markdown:\n%s", md)
			}
			alpn := strings.Join(proxyALPN(tc.protocol), ", ")
			handshakes := conns
			if h2Clients(tc.protocol) {
				handshakes = 0 // h2load does not count them
			}
			eachArm(t, rep, func(t *testing.T, arm string, results []ProxyResult) {
				for _, res := range results {
					if res.TLS == nil {
						t.Fatalf("rep %d: no TLS", res.Rep)
					}
					want := ProxyTLSResult{Handshakes: handshakes, Version: "TLS 1.3", CipherSuite: res.TLS.CipherSuite, ALPN: alpn}
					if *res.TLS != want || res.TLS.CipherSuite == "" {
						t.Errorf("rep %d: TLS %+v, want %+v with a cipher suite", res.Rep, res.TLS, want)
					}
				}
				if !strings.Contains(md, fmt.Sprintf("; %s TLS 1.3 ", arm)) && !strings.Contains(md, fmt.Sprintf("agreed: %s TLS 1.3 ", arm)) {
					t.Errorf("the TLS line does not name %s:\n%s", arm, md)
				}
			})
		})
	}
}

// eachArm runs check, in a subtest per arm of rep, on that arm's results:
// an arm skipped is skipMissingTool's, one with no result fails.
func eachArm(t *testing.T, rep *ProxyReport, check func(t *testing.T, arm string, results []ProxyResult)) {
	t.Helper()
	for _, a := range rep.Arms {
		t.Run(a.Name, func(t *testing.T) {
			skipMissingTool(t, a)
			var results []ProxyResult
			for _, res := range rep.Results {
				if res.Arm == a.Name {
					results = append(results, res)
				}
			}
			if len(results) == 0 {
				t.Fatal("no measurement")
			}
			check(t, a.Name, results)
		})
	}
}

package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The proxy arms' configurations. Each generator takes the address the
// proxy listens on and the upstream echo server's address (both numeric
// "ip:port") and returns a config file's text; the files live in the run's
// temporary directory and go with it.

// SpindleProxyConfig returns a `spindle proxy` config: one listener
// forwarding to the single upstream, on the engine backend given, with one
// loop on cpu. No health checks and no admin server: the data path only.
// With protocol ProxyProtocolHTTP the listener is an HTTP/1.1 reverse
// proxy (mode http, no routes: every request to the pool) whose pool keeps
// up to conns idle keep-alive connections to the upstream (max_idle, per
// server per loop; there is one loop), so that each client connection can
// have its upstream connection back for its next request. With
// ProxyProtocolH2 the listener is that and takes HTTP/2 clients with prior
// knowledge too (h2c: true), each stream forwarded as an HTTP/1.1 request
// over the same pool; with ProxyProtocolH2H2 the pool's protocol is h2c
// too, each stream forwarded as an HTTP/2 stream over multiplexed upstream
// connections, up to conns of them (h2_max_connections). With tls (nil:
// plain) the listener terminates TLS 1.3 with its certificate (tls:
// cert_file, key_file, min_version 1.3), offering the protocol's ALPN
// (proxyALPN); its HTTP/2 clients choose h2 by ALPN, not h2c.
func SpindleProxyConfig(protocol, backend, listen, upstream string, cpu, conns int, tls *ProxyTLS) string {
	return spindleProxyConfig(protocol, backend, listen, upstream, cpu, conns, "", tls)
}

// spindleProxyConfig is SpindleProxyConfig with the listener's access log
// written, as JSON lines, to accessLog where it is not empty.
func spindleProxyConfig(protocol, backend, listen, upstream string, cpu, conns int, accessLog string, tls *ProxyTLS) string {
	mode, pool := "", ""
	if protocol != ProxyProtocolTCP {
		mode = "\n    mode: http"
		pool = fmt.Sprintf("\n    max_idle: %d", conns)
	}
	switch {
	case tls != nil:
		alpn := ""
		if a := proxyALPN(protocol); a != nil {
			alpn = fmt.Sprintf(", alpn: [%s]", strings.Join(a, ", "))
		}
		mode += fmt.Sprintf("\n    tls: {cert_file: %q, key_file: %q, min_version: \"1.3\"%s}", tls.CertFile, tls.KeyFile, alpn)
	case h2Clients(protocol):
		mode += "\n    h2c: true"
	}
	if protocol == ProxyProtocolH2H2 {
		// Streams share a connection up to the server's
		// SETTINGS_MAX_CONCURRENT_STREAMS (100 for bench http2's spindle
		// arms); the pool's default bound on connections, 4 per loop,
		// would queue streams beyond 400 in flight (the default run has
		// 500). One per stream in flight is a bound no run reaches.
		// max_idle (HTTP/1.1 connections) has nothing to keep.
		pool = fmt.Sprintf("\n    protocol: h2c\n    h2_max_connections: %d", conns)
	}
	if accessLog != "" {
		mode += fmt.Sprintf("\n    access_log: {path: %q, format: json}", accessLog)
	}
	return fmt.Sprintf(`# spindle bench proxy: generated, removed after the run
engine:
  backend: %s
  cpus: [%d]
listeners:
  - name: bench
    listen: %q%s
    pool: upstream
pools:
  - name: upstream
    servers: [%q]%s
`, backend, cpu, listen, mode, upstream, pool)
}

// HAProxyConfig returns an HAProxy config with one thread, forwarding
// listen to upstream, for up to conns clients: mode tcp, or with protocol
// ProxyProtocolHTTP mode http with keep-alive on both sides (option
// http-keep-alive towards the client, http-reuse always towards the
// upstream, whose idle connections any client's request may take). Its
// idle pool takes a connection back only while idle connections hold less
// than tune.pool-low-fd-ratio (20) percent of its fds, and kills them
// above tune.pool-high-fd-ratio (25): with maxconn sized to the clients,
// one idle upstream connection per client is about that share, and HAProxy
// closed each upstream connection after its response and connected anew
// for the next request (twice the CPU per request). Both ratios are 100
// here; maxconn bounds the connections all the same. Logging is off; timeouts are long enough that no idle benchmark
// connection is cut (timeout http-request and http-keep-alive default to
// timeout client). maxconn is sized to conns: HAProxy raises its fd limit
// to twice it at start and refuses to start where it cannot. With
// ProxyProtocolH2 it is the mode http config whose frontend takes HTTP/2
// with prior knowledge (bind … proto h2) and forwards HTTP/1.1 as with
// ProxyProtocolHTTP; with ProxyProtocolH2H2 its server line has proto h2
// too (HTTP/2 with prior knowledge to the upstream, whose connections
// http-reuse always lets any client's streams share). With tls (nil:
// plain) the bind terminates TLS 1.3 (ssl crt, the certificate and key in
// one file, ssl-min-ver TLSv1.3), offering the protocol's ALPN
// (proxyALPN): HTTP/2 clients choose h2 by it instead of proto h2; its
// one cipher suite is proxyTLSCipher.
func HAProxyConfig(protocol, listen, upstream string, conns int, tls *ProxyTLS) string {
	global, mode, backend, bind, server := "", "tcp", "", listen, upstream
	switch {
	case tls != nil:
		bind += fmt.Sprintf(" ssl crt %s ssl-min-ver TLSv1.3 ciphersuites %s", tls.PEMFile, proxyTLSCipher)
		if a := proxyALPN(protocol); a != nil {
			bind += " alpn " + strings.Join(a, ",")
		}
	case h2Clients(protocol):
		bind += " proto h2"
	}
	if protocol == ProxyProtocolH2H2 {
		server += " proto h2"
	}
	if protocol != ProxyProtocolTCP {
		global = "\n    tune.pool-low-fd-ratio 100\n    tune.pool-high-fd-ratio 100"
		mode = "http\n    option http-keep-alive"
		backend = "\n    http-reuse always"
	}
	return fmt.Sprintf(`# spindle bench proxy: generated, removed after the run
global
    nbthread 1
    maxconn %d%s

defaults
    mode %s
    timeout connect 5s
    timeout client 5m
    timeout server 5m

frontend bench
    bind %s
    default_backend upstream

backend upstream%s
    server s1 %s
`, conns+64, global, mode, bind, backend, server)
}

// NginxConfig returns an nginx config proxying listen to upstream for up
// to conns clients (two connections each): one process (no master, no
// daemon), its pid file in dir, errors on stderr. With protocol
// ProxyProtocolTCP it is the stream module's proxy, module being the
// stream module's .so to load ("" when nginx has it built in); with
// ProxyProtocolHTTP the http module's reverse proxy (nginxHTTPBlock;
// module is not loaded), with ProxyProtocolH2 that reverse proxy
// taking HTTP/2 with prior knowledge (`listen … http2` without ssl), and
// with ProxyProtocolH2H2 the same listener passing each request to the
// upstream over HTTP/2 with grpc_pass (nginx proxies HTTP/2 to an
// upstream with its gRPC module only; plain GETs pass through it too),
// the upstream connections kept alive as the HTTP proxy's. With tls
// (nil: plain) the listener terminates TLS 1.3 (`listen … ssl`,
// ssl_certificate, ssl_certificate_key, ssl_protocols TLSv1.3, the one
// cipher suite proxyTLSCipher by ssl_conf_command; with h2
// and h2h2 `listen … ssl http2`, HTTP/2 by ALPN), in the stream module
// too.
func NginxConfig(protocol, dir, module, listen, upstream string, conns int, tls *ProxyTLS) string {
	load := ""
	if module != "" && protocol == ProxyProtocolTCP {
		load = fmt.Sprintf("load_module %s;\n", module)
	}
	ssl := nginxSSL(tls)
	if tls != nil {
		listen += " ssl"
	}
	proxy := fmt.Sprintf(`stream {
    server {
        listen %s;%s
        proxy_pass %s;
    }
}
`, listen, ssl, upstream)
	switch protocol {
	case ProxyProtocolHTTP:
		proxy = nginxHTTPBlock(dir, listen, ssl, upstream, nginxHTTP1Pass, conns)
	case ProxyProtocolH2:
		proxy = nginxHTTPBlock(dir, listen+" http2", ssl, upstream, nginxHTTP1Pass, conns)
	case ProxyProtocolH2H2:
		proxy = nginxHTTPBlock(dir, listen+" http2", ssl, upstream, nginxH2Pass, conns)
	}
	return "# spindle bench proxy: generated, removed after the run\n" + load + nginxMain(dir, 2*conns+64) + proxy
}

// proxyTLSCipher is the one TLS 1.3 cipher suite HAProxy and nginx are
// given with --tls: the one the spindle arms' Go server picks where the
// CPU has AES instructions, whatever the client prefers. Left to
// themselves, HAProxy (its own order, OpenSSL's: AES-256-GCM first) and
// nginx (the client's order: h2load's OpenSSL offers AES-256-GCM first)
// would encrypt with another cipher than the spindle arms.
const proxyTLSCipher = "TLS_AES_128_GCM_SHA256"

// nginxSSL is the directives, each on a line of its own after a newline,
// of an nginx server whose listener terminates TLS 1.3 with tls's
// certificate; "" for nil.
func nginxSSL(tls *ProxyTLS) string {
	if tls == nil {
		return ""
	}
	return fmt.Sprintf("\n        ssl_certificate %s;\n        ssl_certificate_key %s;\n        ssl_protocols TLSv1.3;\n        ssl_conf_command Ciphersuites %s;", tls.CertFile, tls.KeyFile, proxyTLSCipher)
}

// nginxMain is the main and events sections of the nginx configs, up to
// the protocol's block: one process (no master, no daemon) with up to
// connections connections, its pid file in dir, errors on stderr.
func nginxMain(dir string, connections int) string {
	return fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %s;
error_log stderr warn;

events {
    worker_connections %d;
}

`, filepath.Join(dir, "nginx.pid"), connections)
}

// nginxKeepaliveRequests is the number of requests after which nginx ends
// a keep-alive connection, on the client's side and the upstream's. Its
// default, 1000, ends a client's connection with "Connection: close",
// which fails the load generator's run (its connections last the run),
// and would make the upstream side reconnect: 10^9 is more than a run
// sends on one connection (nearly three hours at 100000 requests a second)
// and within what nginx takes on any system (at most 2^31-1 on 32 bits).
const nginxKeepaliveRequests = 1_000_000_000

// The location bodies of nginxHTTPBlock: HTTP/1.1 to the upstream
// (proxy_http_version 1.1 and an empty Connection field, without which
// nginx would close each upstream connection after one request), or
// HTTP/2 (grpc_pass; the gRPC module keeps its connections alive without
// more).
const (
	nginxHTTP1Pass = `proxy_pass http://u;
            proxy_http_version 1.1;
            proxy_set_header Connection "";`
	nginxH2Pass = `grpc_pass grpc://u;`
)

// nginxHTTPBlock is NginxConfig's http block: a reverse proxy on listen
// passing every request to upstream as pass says (nginxHTTP1Pass,
// nginxH2Pass), whose upstream keeps up to conns idle keep-alive
// connections, with keep-alive on the client's side too, both for nginxKeepaliveRequests requests and 300s
// idle. keepalive_time (nginx 1.19.10 and later: a keep-alive connection's
// lifetime, 1h) is left at its default, for an older nginx refuses the
// directive: it would end a measurement longer than an hour. No access
// log; the temporary files nginx's http module makes its directories for
// at start are in dir, not where the distribution put them. listen may
// carry parameters after the address ("127.0.0.1:80 ssl http2"), and ssl
// is the server's TLS directives (nginxSSL).
func nginxHTTPBlock(dir, listen, ssl, upstream, pass string, conns int) string {
	return fmt.Sprintf(`http {
    access_log off;
%s
    upstream u {
        server %s;
        keepalive %d;
        keepalive_requests %d;
        keepalive_timeout 300s;
    }

    server {
        listen %s;%s
        keepalive_requests %d;
        keepalive_timeout 300s;
        location / {
            %s
        }
    }
}
`, nginxTempPaths(dir), upstream, conns, nginxKeepaliveRequests, listen, ssl, nginxKeepaliveRequests, pass)
}

// nginxTempPaths are the directives that put the temporary directories
// nginx's http module makes at start in dir, one line each.
func nginxTempPaths(dir string) string {
	temp := ""
	for _, t := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		temp += fmt.Sprintf("    %s_temp_path %s;\n", t, filepath.Join(dir, t))
	}
	return temp
}

// nginxStreamModules are where distributions put the dynamic stream
// module (Debian's libnginx-mod-stream, then Fedora's nginx-mod-stream).
var nginxStreamModules = []string{
	"/usr/lib/nginx/modules/ngx_stream_module.so",
	"/usr/lib64/nginx/modules/ngx_stream_module.so",
}

// nginxStream finds how nginx gets its stream module: the .so to load, or
// "" when `nginx -V` says it is built in. It fails, naming the package to
// install, when it has neither.
func nginxStream(nginx string) (string, error) {
	for _, m := range nginxStreamModules {
		if _, err := os.Stat(m); err == nil {
			return m, nil
		}
	}
	out, err := exec.Command(nginx, "-V").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s -V: %v", nginx, err)
	}
	for _, f := range strings.Fields(string(out)) {
		if f == "--with-stream" {
			return "", nil
		}
	}
	return "", fmt.Errorf("nginx has no stream module (not built in, and none of %s): install libnginx-mod-stream (apt-get install libnginx-mod-stream)", strings.Join(nginxStreamModules, ", "))
}

// nginxHTTPProxy checks that nginx has what the HTTP arm's config uses:
// the http module with its proxy and upstream keep-alive modules, which
// are built in unless `nginx -V` says they were left out.
func nginxHTTPProxy(nginx string) error {
	return nginxWithout(nginx, "it cannot be the HTTP reverse proxy", "--without-http", "--without-http_proxy_module", "--without-http_upstream_keepalive_module")
}

// nginxH2Upstream checks that nginx has the gRPC module the h2h2 arm's
// grpc_pass needs, built in unless `nginx -V` says it was left out.
func nginxH2Upstream(nginx string) error {
	return nginxWithout(nginx, "it cannot proxy HTTP/2 to an upstream (grpc_pass)", "--without-http_grpc_module")
}

// nginxWithout returns an error, saying why (so), when `nginx -V` lists
// one of the configure flags given.
func nginxWithout(nginx, so string, flags ...string) error {
	out, err := exec.Command(nginx, "-V").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -V: %v", nginx, err)
	}
	for _, f := range strings.Fields(string(out)) {
		if slices.Contains(flags, f) {
			return fmt.Errorf("nginx was built %s: %s", f, so)
		}
	}
	return nil
}

// haproxyTLS checks that haproxy was built with an SSL library, which
// `haproxy -vv` names ("Built with OpenSSL version", LibreSSL's and
// others' saying so too): without one its bind cannot take ssl.
func haproxyTLS(haproxy string) error {
	out, err := exec.Command(haproxy, "-vv").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -vv: %v", haproxy, err)
	}
	if !strings.Contains(string(out), "Built with OpenSSL") {
		return errors.New("haproxy was built without OpenSSL (haproxy -vv has no \"Built with OpenSSL\"): it cannot terminate TLS")
	}
	return nil
}

// nginxTLS checks that nginx has the SSL module of the listener --tls
// gives it (the http module's with httpMode, else the stream module's),
// which `nginx -V` lists as --with-http_ssl_module or
// --with-stream_ssl_module when built in.
func nginxTLS(nginx string, httpMode bool) error {
	flag := "--with-stream_ssl_module"
	if httpMode {
		flag = "--with-http_ssl_module"
	}
	out, err := exec.Command(nginx, "-V").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -V: %v", nginx, err)
	}
	if !slices.Contains(strings.Fields(string(out)), flag) {
		return fmt.Errorf("nginx was built without %s: it cannot terminate TLS there", flag)
	}
	return nil
}

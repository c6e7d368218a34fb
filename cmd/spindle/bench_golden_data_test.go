package main

// benchCLIGolden is what TestBenchSideBySideCLIGolden expects, made on the
// commands as they were before their flag parsing was shared.
const benchCLIGolden = `$ spindle bench -h
exit 0
--- stdout
--- stderr
usage: spindle bench [flags]            every arm: closed-loop peak, then open loop at 50% and 80% of the slowest peak
       spindle bench sweep [flags]      closed-loop grid of loops × compute-us × arm
       spindle bench proxy [flags]      proxies side by side (spindle, HAProxy, nginx, none), L4, HTTP/1.1 or HTTP/2 (--protocol), in front of one upstream server
       spindle bench http2 [flags]      HTTP/2 servers side by side (spindle, Go's net/http, nginx), h2c under h2load
       spindle bench ab [flags] ARMS    server builds paired by repetition: server CPU per request, each arm ÷ the first ("NAME=COMMAND ARGS..." each)
       spindle bench server [flags]     the server half (-arm, -listen, -loops, -cpus, -compute-us)
       spindle bench client [flags]     the client half against -addr
  -arms string
    	comma-separated arms to run, of go-net, gnet, c-liburing, epoll, epoll-busypoll, uring, uring-sqpoll, uring-napi, uring-batch (default: every arm that can run here but uring-batch, run only when named)
  -client-block
    	client threads sleep in epoll_wait instead of polling (the server then pays for waking them)
  -client-cpus string
    	CPUs the client threads, and the harness's own (its Go runtime's included), are pinned to (default: the first CPU this process may run on that is not the server's, looked for from the one after the default server CPUs, or from the second when --server-cpus is given, and then from the start; the last when every one is the server's)
  -client-threads int
    	client threads, at most --conns (default: one per client CPU, at most --conns)
  -compute-us int
    	µs the server spins per request before replying, on the wall clock (CLOCK_MONOTONIC, not the thread's CPU time: an interrupt, softirq or preemption meanwhile is inside them, not added)
  -conns int
    	client connections (default 50)
  -duration duration
    	total measuring budget, shared among the measurements (start-up and drains add about a fifth); each takes at least 150ms, and a shorter share is a smoke run, said so before measuring and in the report (default 1m40s)
  -fractions string
    	open-loop rates as fractions of the slowest arm's peak (default "0.5,0.8")
  -inflight int
    	closed-loop requests in flight per connection (default 1)
  -json
    	print the report as one JSON document on stdout (schema: docs/BENCH-SCHEMA.md)
  -loops int
    	server event loops (default 1)
  -out string
    	directory for report.json, report.md and report.html ("" for none; with --json, none unless set) (default "bench-report")
  -payload int
    	RPC payload bytes (default 128)
  -peers-dir string
    	bench/peers module source (default: found from the working directory)
  -ratio-to string
    	comma-separated reference arms: the report divides every other arm's server CPU per request and p99 by each one's of the same repetition ("none" for no ratios; default: go-net, gnet and c-liburing, those of them that run)
  -reps int
    	repetitions of each measurement (arms alternate within each, in reverse order in even ones) (default 3)
  -server-cpus string
    	CPUs the server is pinned to (default: the first CPUs this process may run on, one per loop)
  -server-rps value
    	wire topology: RPS CPUs (a CPU list, or none) for the server veth's receive queues; repeat it to measure every arm under each, alternated
  -spare-cpus string
    	CPUs for arms' polling threads (uring-sqpoll), default: CPUs neither server nor client
  -topology string
    	loopback, or wire (two netns joined by a veth pair; root) (default "loopback")
  -warmup duration
    	each measurement's dropped warm-up (default: a fifth of its share of --duration, at least 50ms and at most 1s; with --window, the two within the share)
  -window duration
    	each measurement's measured window (default: the rest of its share of --duration; with --warmup, the two within the share)
$ spindle bench http2 -h
exit 0
--- stdout
--- stderr
usage: spindle bench http2 [flags]    HTTP/2 servers (spindle uring and epoll, Go's net/http, nginx) side by side, h2c with prior knowledge,
       under h2load (apt-get install nghttp2-client) pinned to the client CPUs, closed loop; every request's status and body length checked, a reply checked whole before and after each load

The measurement for docs/BENCHMARKS.md, on a quiet machine (4 arms × 2 streams values × 5 reps: 3 s each, 0.6 s of it warm-up):
  go build -o /tmp/spindle ./cmd/spindle && /tmp/spindle bench http2 --duration 120s --reps 5 --server-cpus 0 --client-cpus 1 --out bench-http2-report
  -arms string
    	comma-separated arms, of spindle-uring,spindle-epoll,go-net-http,nginx (default: all); ratios are to the first that runs
  -body int
    	response body bytes (default 64)
  -client-cpus string
    	CPUs h2load is pinned to, one thread each (default: the second CPU this process may run on, the first that is not --server-cpus' when that one is, the first on one CPU)
  -conns int
    	h2load connections (-c) (default 50)
  -duration duration
    	total measuring budget, shared among the measurements; each takes at least 150ms, and a shorter share is a smoke run, said so before measuring and in the report (default 1m0s)
  -json
    	print the report as one JSON document on stdout (schema: docs/BENCH-SCHEMA.md)
  -out string
    	directory for report.json and report.md ("" for none; with --json, none unless set) (default "bench-http2-report")
  -ratio-to string
    	comma-separated reference arms: the report divides every other arm's server CPU per request and p99 by each one's of the same repetition ("none" for no ratios; default: go-net-http and nginx, those of them that run)
  -reps int
    	repetitions (arms alternate within each, in reverse order in even ones) (default 3)
  -server-cpus string
    	CPUs the server is pinned to (default: the first CPU this process may run on)
  -streams string
    	streams in flight per connection (h2load -m, at most 100), each value a load point of its own (default "1,10")
$ spindle bench http2 --bogus
exit 2
--- stdout
--- stderr
usage: spindle bench http2 [flags]    HTTP/2 servers (spindle uring and epoll, Go's net/http, nginx) side by side, h2c with prior knowledge,
       under h2load (apt-get install nghttp2-client) pinned to the client CPUs, closed loop; every request's status and body length checked, a reply checked whole before and after each load

The measurement for docs/BENCHMARKS.md, on a quiet machine (4 arms × 2 streams values × 5 reps: 3 s each, 0.6 s of it warm-up):
  go build -o /tmp/spindle ./cmd/spindle && /tmp/spindle bench http2 --duration 120s --reps 5 --server-cpus 0 --client-cpus 1 --out bench-http2-report
  -arms string
    	comma-separated arms, of spindle-uring,spindle-epoll,go-net-http,nginx (default: all); ratios are to the first that runs
  -body int
    	response body bytes (default 64)
  -client-cpus string
    	CPUs h2load is pinned to, one thread each (default: the second CPU this process may run on, the first that is not --server-cpus' when that one is, the first on one CPU)
  -conns int
    	h2load connections (-c) (default 50)
  -duration duration
    	total measuring budget, shared among the measurements; each takes at least 150ms, and a shorter share is a smoke run, said so before measuring and in the report (default 1m0s)
  -json
    	print the report as one JSON document on stdout (schema: docs/BENCH-SCHEMA.md)
  -out string
    	directory for report.json and report.md ("" for none; with --json, none unless set) (default "bench-http2-report")
  -ratio-to string
    	comma-separated reference arms: the report divides every other arm's server CPU per request and p99 by each one's of the same repetition ("none" for no ratios; default: go-net-http and nginx, those of them that run)
  -reps int
    	repetitions (arms alternate within each, in reverse order in even ones) (default 3)
  -server-cpus string
    	CPUs the server is pinned to (default: the first CPU this process may run on)
  -streams string
    	streams in flight per connection (h2load -m, at most 100), each value a load point of its own (default "1,10")
spindle bench http2: flag provided but not defined: -bogus
$ spindle bench http2 --duration 0s
exit 2
--- stdout
--- stderr
spindle bench http2: want a positive --duration
run 'spindle bench http2 -h' for usage
$ spindle bench http2 --reps 0 --body -1
exit 2
--- stdout
--- stderr
spindle bench http2: want --reps and --conns of at least 1
run 'spindle bench http2 -h' for usage
$ spindle bench http2 --body -1
exit 2
--- stdout
--- stderr
spindle bench http2: want a --body of 0 to 1048576 bytes
run 'spindle bench http2 -h' for usage
$ spindle bench http2 --streams 1,x
exit 2
--- stdout
--- stderr
spindle bench http2: --streams: bad value "x" (want integers of at least 1)
run 'spindle bench http2 -h' for usage
$ spindle bench http2 --server-cpus x --client-cpus y
exit 2
--- stdout
--- stderr
spindle bench http2: --server-cpus: bench: cpu list "x": bad cpu number "x"
run 'spindle bench http2 -h' for usage
$ spindle bench http2 --client-cpus y
exit 2
--- stdout
--- stderr
spindle bench http2: --client-cpus: bench: cpu list "y": bad cpu number "y"
run 'spindle bench http2 -h' for usage
$ spindle bench http2 --out  --arms h2o,nginx
exit 2
--- stdout
--- stderr
spindle bench http2: --arms: bench: unknown http2 arm "h2o" (arms: spindle-uring, spindle-epoll, go-net-http, nginx)
run 'spindle bench http2 -h' for usage
$ spindle bench http2 --out  --ratio-to go-net
exit 2
--- stdout
--- stderr
spindle bench http2: --ratio-to: bench: ratio reference "go-net" is not one of the arms asked for (spindle-uring, spindle-epoll, go-net-http, nginx)
run 'spindle bench http2 -h' for usage
$ spindle bench http2 --out  --conns 3 --duration 2s --reps 2 --streams 2,5 --body 10 --server-cpus 4000 --client-cpus 4001
exit 1
--- stdout
--- stderr
spindle bench http2: bench: CPU 4000 does not exist or is offline (online CPUs: N)
$ spindle bench proxy -h
exit 0
--- stdout
--- stderr
usage: spindle bench proxy [flags]    L4 (or, with --protocol http, HTTP/1.1) proxies (spindle uring and epoll, HAProxy, nginx) and no proxy, side by side in front of one echo server, closed loop;
       with --protocol h2, HTTP/2 clients (h2load, apt-get install nghttp2-client, pinned to the client CPUs; every request's status and body length checked, a reply checked whole before and after each load) through those proxies to the HTTP/1.1 echo;
       with --protocol h2h2, the same clients through those proxies speaking HTTP/2 to an h2c server of bench http2 (--upstream-arm), and straight to it (direct);
       with --tls, in any protocol, the proxies terminating TLS 1.3 on the client side (a throwaway certificate made at the start; no direct arm);
       with --tls-handshakes (tcp, http), a connection and a full TLS handshake per request, --tls-resume a resumed one

The h2 measurement for docs/BENCHMARKS.md, on a quiet machine (4 arms × 2 streams values × 5 reps: 3 s each, 0.6 s of it warm-up):
  go build -o /tmp/spindle ./cmd/spindle && /tmp/spindle bench proxy --protocol h2 --duration 120s --reps 5 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-h2-report
The h2h2 measurement (5 arms × 2 streams values × 5 reps: 3 s each):
  /tmp/spindle bench proxy --protocol h2h2 --duration 150s --reps 5 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-h2h2-report
The TLS measurement (4 arms × 5 reps: 7.5 s each, 1.5 s of it warm-up):
  /tmp/spindle bench proxy --tls --protocol http --duration 150s --reps 5 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-tls-report
The TLS handshake measurement (4 arms × 3 reps: 7.5 s each):
  /tmp/spindle bench proxy --tls-handshakes --protocol http --duration 90s --reps 3 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-tls-handshakes-report
  -arms string
    	comma-separated arms, of spindle-uring,spindle-epoll,haproxy,nginx,direct (the default), or also spindle-uring-log; ratios are to the first
  -client-cpus string
    	CPUs the client threads, and the harness's own (its Go runtime's included), are pinned to (default: the second CPU this process may run on, the first that is not --proxy-cpu's when that one is, the first on one CPU)
  -conns int
    	client connections, one request in flight each (with --protocol h2 and h2h2, --streams each) (default 50)
  -duration duration
    	total measuring budget, shared among the measurements; each takes at least 150ms, and a shorter share is a smoke run, said so before measuring and in the report (default 1m0s)
  -json
    	print the report as one JSON document on stdout
  -out string
    	directory for report.json and report.md ("" for none; with --json, none unless set) (default "bench-proxy-report")
  -payload int
    	payload bytes (the RPC payload, or the HTTP request and response body; with h2 and h2h2 the response body) (default 64)
  -protocol string
    	tcp: L4 proxies, the RPC echo; http: HTTP/1.1 reverse proxies, keep-alive POSTs of the payload, echoed; h2: HTTP/2 clients (h2load GETs, h2c with prior knowledge) through reverse proxies to the HTTP/1.1 echo (no direct arm: the echo does not speak h2c); h2h2: those clients through reverse proxies speaking HTTP/2 to an h2c upstream (spindle's pool protocol h2c, HAProxy's proto h2, nginx's grpc_pass), and direct (default "tcp")
  -proxy-cpu string
    	CPUs the proxy is pinned to (default: the first CPU this process may run on)
  -ratio-to string
    	comma-separated reference arms: the report divides every other arm's proxy CPU, upstream CPU and their sum per request and p99 (direct has no proxy CPU) by each one's of the same repetition ("none" for no ratios; default: haproxy and nginx, those of them that run)
  -reps int
    	repetitions (arms alternate within each, in reverse order in even ones) (default 3)
  -streams string
    	with --protocol h2 or h2h2: streams in flight per connection (h2load -m, at most 100), each value a load point of its own (default "1,10")
  -tls
    	the proxies terminate TLS 1.3 on the client side (spindle's tls:, HAProxy's bind … ssl crt, nginx's listen … ssl) with a throwaway self-signed ECDSA P-256 certificate made at the run's start; the clients speak TLS on keep-alive connections, each handshaking once before its measurement (h2 and h2h2: h2load over https, HTTP/2 by ALPN); the upstream side stays plain; no direct arm
  -tls-handshakes
    	with --protocol tcp or http (implies --tls): every request on a connection of its own, with a full TLS 1.3 handshake (the client offers no resumption), --conns connection slots in closed loop, each connecting, handshaking, sending one request, verifying the reply and closing (the client first); the run fails where a connection resumed
  -tls-resume
    	--tls-handshakes with session resumption: the client offers the last ticket it was sent on every connection; the run fails where more than one connection a slot made a full handshake
  -upstream-arm string
    	the upstream server's arm: with --protocol tcp, http or h2 one of bench server's, each answering the RPC echo and HTTP/1.1: go-net, epoll, epoll-busypoll, uring, uring-sqpoll, uring-napi, uring-batch (default epoll); with --protocol h2h2 one of bench http2's h2c servers: spindle-uring, spindle-epoll, go-net-http, nginx (default spindle-uring)
  -upstream-cpus string
    	CPUs the upstream server is pinned to (default: the client CPUs)
$ spindle bench proxy extra
exit 2
--- stdout
--- stderr
usage: spindle bench proxy [flags]    L4 (or, with --protocol http, HTTP/1.1) proxies (spindle uring and epoll, HAProxy, nginx) and no proxy, side by side in front of one echo server, closed loop;
       with --protocol h2, HTTP/2 clients (h2load, apt-get install nghttp2-client, pinned to the client CPUs; every request's status and body length checked, a reply checked whole before and after each load) through those proxies to the HTTP/1.1 echo;
       with --protocol h2h2, the same clients through those proxies speaking HTTP/2 to an h2c server of bench http2 (--upstream-arm), and straight to it (direct);
       with --tls, in any protocol, the proxies terminating TLS 1.3 on the client side (a throwaway certificate made at the start; no direct arm);
       with --tls-handshakes (tcp, http), a connection and a full TLS handshake per request, --tls-resume a resumed one

The h2 measurement for docs/BENCHMARKS.md, on a quiet machine (4 arms × 2 streams values × 5 reps: 3 s each, 0.6 s of it warm-up):
  go build -o /tmp/spindle ./cmd/spindle && /tmp/spindle bench proxy --protocol h2 --duration 120s --reps 5 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-h2-report
The h2h2 measurement (5 arms × 2 streams values × 5 reps: 3 s each):
  /tmp/spindle bench proxy --protocol h2h2 --duration 150s --reps 5 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-h2h2-report
The TLS measurement (4 arms × 5 reps: 7.5 s each, 1.5 s of it warm-up):
  /tmp/spindle bench proxy --tls --protocol http --duration 150s --reps 5 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-tls-report
The TLS handshake measurement (4 arms × 3 reps: 7.5 s each):
  /tmp/spindle bench proxy --tls-handshakes --protocol http --duration 90s --reps 3 --proxy-cpu 0 --client-cpus 1 --out bench-proxy-tls-handshakes-report
  -arms string
    	comma-separated arms, of spindle-uring,spindle-epoll,haproxy,nginx,direct (the default), or also spindle-uring-log; ratios are to the first
  -client-cpus string
    	CPUs the client threads, and the harness's own (its Go runtime's included), are pinned to (default: the second CPU this process may run on, the first that is not --proxy-cpu's when that one is, the first on one CPU)
  -conns int
    	client connections, one request in flight each (with --protocol h2 and h2h2, --streams each) (default 50)
  -duration duration
    	total measuring budget, shared among the measurements; each takes at least 150ms, and a shorter share is a smoke run, said so before measuring and in the report (default 1m0s)
  -json
    	print the report as one JSON document on stdout
  -out string
    	directory for report.json and report.md ("" for none; with --json, none unless set) (default "bench-proxy-report")
  -payload int
    	payload bytes (the RPC payload, or the HTTP request and response body; with h2 and h2h2 the response body) (default 64)
  -protocol string
    	tcp: L4 proxies, the RPC echo; http: HTTP/1.1 reverse proxies, keep-alive POSTs of the payload, echoed; h2: HTTP/2 clients (h2load GETs, h2c with prior knowledge) through reverse proxies to the HTTP/1.1 echo (no direct arm: the echo does not speak h2c); h2h2: those clients through reverse proxies speaking HTTP/2 to an h2c upstream (spindle's pool protocol h2c, HAProxy's proto h2, nginx's grpc_pass), and direct (default "tcp")
  -proxy-cpu string
    	CPUs the proxy is pinned to (default: the first CPU this process may run on)
  -ratio-to string
    	comma-separated reference arms: the report divides every other arm's proxy CPU, upstream CPU and their sum per request and p99 (direct has no proxy CPU) by each one's of the same repetition ("none" for no ratios; default: haproxy and nginx, those of them that run)
  -reps int
    	repetitions (arms alternate within each, in reverse order in even ones) (default 3)
  -streams string
    	with --protocol h2 or h2h2: streams in flight per connection (h2load -m, at most 100), each value a load point of its own (default "1,10")
  -tls
    	the proxies terminate TLS 1.3 on the client side (spindle's tls:, HAProxy's bind … ssl crt, nginx's listen … ssl) with a throwaway self-signed ECDSA P-256 certificate made at the run's start; the clients speak TLS on keep-alive connections, each handshaking once before its measurement (h2 and h2h2: h2load over https, HTTP/2 by ALPN); the upstream side stays plain; no direct arm
  -tls-handshakes
    	with --protocol tcp or http (implies --tls): every request on a connection of its own, with a full TLS 1.3 handshake (the client offers no resumption), --conns connection slots in closed loop, each connecting, handshaking, sending one request, verifying the reply and closing (the client first); the run fails where a connection resumed
  -tls-resume
    	--tls-handshakes with session resumption: the client offers the last ticket it was sent on every connection; the run fails where more than one connection a slot made a full handshake
  -upstream-arm string
    	the upstream server's arm: with --protocol tcp, http or h2 one of bench server's, each answering the RPC echo and HTTP/1.1: go-net, epoll, epoll-busypoll, uring, uring-sqpoll, uring-napi, uring-batch (default epoll); with --protocol h2h2 one of bench http2's h2c servers: spindle-uring, spindle-epoll, go-net-http, nginx (default spindle-uring)
  -upstream-cpus string
    	CPUs the upstream server is pinned to (default: the client CPUs)
spindle bench proxy: unexpected argument "extra": this command takes only flags
$ spindle bench proxy --protocol udp --duration 0s
exit 2
--- stdout
--- stderr
spindle bench proxy: want a --protocol of tcp or http or h2 or h2h2
run 'spindle bench proxy -h' for usage
$ spindle bench proxy --duration -1s --payload 1
exit 2
--- stdout
--- stderr
spindle bench proxy: want a positive --duration
run 'spindle bench proxy -h' for usage
$ spindle bench proxy --conns 0
exit 2
--- stdout
--- stderr
spindle bench proxy: want --reps and --conns of at least 1
run 'spindle bench proxy -h' for usage
$ spindle bench proxy --payload 1
exit 2
--- stdout
--- stderr
spindle bench proxy: want a --payload of 16 to 1048576 bytes
run 'spindle bench proxy -h' for usage
$ spindle bench proxy --streams 1
exit 2
--- stdout
--- stderr
spindle bench proxy: --streams is for --protocol h2 and h2h2
run 'spindle bench proxy -h' for usage
$ spindle bench proxy --protocol h2 --streams 0
exit 2
--- stdout
--- stderr
spindle bench proxy: --streams: bad value "0" (want integers of at least 1)
run 'spindle bench proxy -h' for usage
$ spindle bench proxy --proxy-cpu x --client-cpus y --upstream-cpus z
exit 2
--- stdout
--- stderr
spindle bench proxy: --proxy-cpu: bench: cpu list "x": bad cpu number "x"
run 'spindle bench proxy -h' for usage
$ spindle bench proxy --upstream-cpus z
exit 2
--- stdout
--- stderr
spindle bench proxy: --upstream-cpus: bench: cpu list "z": bad cpu number "z"
run 'spindle bench proxy -h' for usage
$ spindle bench proxy --out  --arms squid
exit 2
--- stdout
--- stderr
spindle bench proxy: --arms: bench: unknown proxy arm "squid" (arms: spindle-uring, spindle-epoll, haproxy, nginx, direct, spindle-uring-log)
run 'spindle bench proxy -h' for usage
$ spindle bench proxy --out  --protocol h2h2 --upstream-arm epoll
exit 2
--- stdout
--- stderr
spindle bench proxy: --upstream-arm: bench: upstream arm "epoll": with the h2h2 protocol one of bench http2's (spindle-uring,spindle-epoll,go-net-http,nginx)
run 'spindle bench proxy -h' for usage
$ spindle bench proxy --out  --json --protocol http --reps 2 --conns 3 --payload 100 --upstream-cpus 4002
exit 1
--- stdout
--- stderr
spindle bench proxy: bench: CPU 4002 does not exist or is offline (online CPUs: N)
$ spindle bench proxy --out  --proxy-cpu 4000 --client-cpus 0
exit 1
--- stdout
--- stderr
spindle bench proxy: bench: CPU 4000 does not exist or is offline (online CPUs: N)
$ spindle bench proxy --out  --arms spindle-uring,nginx --ratio-to haproxy
exit 2
--- stdout
--- stderr
spindle bench proxy: --ratio-to: bench: ratio reference "haproxy" is not one of the arms asked for (spindle-uring, nginx)
run 'spindle bench proxy -h' for usage
$ spindle bench proxy --out  --ratio-to nginx,nginx
exit 2
--- stdout
--- stderr
spindle bench proxy: --ratio-to: bench: ratio reference "nginx" given twice
run 'spindle bench proxy -h' for usage
`

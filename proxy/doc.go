// Package proxy is spindle's sidecar and gateway proxy on the engine: an L4
// TCP proxy and an HTTP/1.1 reverse proxy (which takes HTTP/2 clients
// with h2c, and speaks HTTP/2 to an h2c pool's servers, gRPC's among
// them). Listeners accept on every loop (terminating TLS where they have
// tls: the engine runs it)
// and forward each client to a server of an upstream pool, dialed from the
// loop that accepted the client, handing received buffers to the other
// side without copying them.
//
// A YAML file configures it (LoadConfig, strict: an unknown field is an
// error):
//
//	engine: {backend: uring, cpus: [0, 1], write_timeout: 60s, close_timeout: 30s}
//	listeners:
//	  - {name: web, listen: ":8080", pool: app, connect_timeout: 2s, idle_timeout: 5m, max_conns: 10000}
//	pools:
//	  - name: app
//	    servers: ["10.0.0.1:80", {address: "app2.internal:80", weight: 3}]
//	    balance: least-conn
//	    health: {type: http, path: /healthz, expect: "200-399", interval: 2s, timeout: 1s, rise: 2, fall: 3}
//	    passive: {fails: 3, cooldown: 10s}
//	    max_conns: 500
//	admin: {listen: "127.0.0.1:9901"}
//
// A server may be named by host: New resolves each name once, to the first
// address it resolves to (whichever family that is), and fails naming the
// server when it does not resolve; the data path never resolves, so a
// name's later changes are not seen until the proxy is made again or
// reloaded (Reload resolves every name again).
//
// A server's weight (1 to 256, default 1; a server is a "host:port"
// string or {address, weight}) is its share of the pool's new
// connections. Round-robin is nginx's smooth weighted round-robin: weights
// 5:1:1 give every 7 clients of a loop to the servers as a a b a c a a
// (5, 1 and 1, never 5 in a row); equal weights are plain turns.
// Least-conn takes the server with the fewest connections for its weight
// (connections divided by weight), equals in turn. A server down is left
// out: its share goes to the others by their weights. -check and
// /debug/config write a server of weight 1 as its address, others as the
// map.
//
// Balance hash sends each key to its server, so that caches, sharded
// services and servers holding sessions see the same clients (Envoy's
// maglev, HAProxy's balance hash, nginx's hash consistent):
//
//	pools:
//	  - name: cache
//	    servers: ["10.0.0.7:80", "10.0.0.8:80", {address: "10.0.0.9:80", weight: 2}]
//	    balance: hash
//	    hash: {key: "header:X-User", table_size: 65537, seed: 0}
//
// key is client (the default: the client's address, an IPv4-mapped one
// as IPv4, an IPv6 one whole; behind trusted_proxies the
// X-Forwarded-For client that rate_limit takes), header:<Name> (the
// first field of that name; header:Host the request's host as routes
// match it: an absolute-form target's authority, else Host or an HTTP/2
// request's :authority, without its port or a trailing dot, and
// lower-cased, so that Example.com. and example.com:8080 go to
// example.com's server as they go to its route; an address host as its
// address, so that [0:0::1] goes where [::1] goes and [::ffff:127.0.0.1]
// where 127.0.0.1 goes, as to a route for it), cookie:<name> (the
// first cookie of that name in the request's Cookie fields, its value
// as sent, as HAProxy's req.cook and nginx's $cookie_<name>: an HTTP/1.1
// client sends its cookies in one Cookie field, an HTTP/2 client may
// send each in a field of its own, RFC 9113 8.2.3, and either goes to
// one server;
// header:Cookie is refused, since it would hash the whole line over
// HTTP/1.1 and only the first cookie over HTTP/2), path (the target's
// path as received, before rewrite_prefix, without its query) or
// query:<param> (the parameter's first value in the query, as sent, not
// decoded); a request without the field, cookie or parameter, or whose
// first one is empty ("X-User:", "sid=", "?user=&"), goes by its client,
// as HAProxy's hdr and url_param do (every client that sends an empty
// one would go to one server). A mode tcp listener's pool takes key client alone. Each
// request of a kept-alive connection (and each HTTP/2 stream) is hashed
// by its own key: the idle connections are kept per server, and a
// request takes one to its key's server or dials it.
//
// The pool's table (Maglev: Eisenbud et al., NSDI 2016) is built when
// the proxy is made or a reload changes the pool, and read by the loops
// without a lock: table_size entries (a prime from 127 to 5000011,
// Envoy's bound: a larger one is no more even and takes seconds to
// build on a reload; and 100 a server at least, as the paper has it;
// default 65537: a byte each), which the servers claim in turns along permutations of their
// own (from the hash of their address as configured, not as resolved),
// a server of weight w in w of each max(weights) turns, so that each
// has its weight's share of the entries to within about servers
// entries (each claims one in the first turn, whatever its weight): a
// point at most. A key's hash modulo table_size is its
// entry and names its server. Removing a server (a reload) moves its
// keys and a few others' (0.3% of all keys in TestMaglevRemove, one
// of 10 removed); adding one takes its share, from each server about
// evenly. The hash is SipHash-2-4 keyed with seed and 0: the same in
// every process, so that proxies with the same servers, weights and
// seed agree on every key (the order the servers are listed in does not
// matter). The default seed, 0, is everyone's: where clients choose the
// key (a header, a query parameter, a path), one can compute offline as
// many keys as it likes that share an entry, and so a server, whatever
// the servers are; a seed kept secret (/debug/config and -check show
// it: keep the admin listener private) leaves it only the keys it has
// seen answered by one server. No seed keeps a client from sending one
// key over and over: balance_factor bounds a hot server's load,
// rate_limit a client's requests. A pool has 64 servers at most.
//
// A key whose server is down (health checks, passive ejection), full
// (max_conns), refuses or was removed by a reload walks on to the next
// entries of the table, to the first server up among those not yet
// tried, each once: the down server's keys go to the others by their
// shares, and the other servers' keys do not move. A server back up
// gets its keys back. When every server is down the client is closed
// (mode tcp) or gets 503, as with the other balances; when every server
// up is full the request waits in the pool's queue, and at its turn
// walks from its entry again (taking an idle connection to the first
// server of its walk that has one: under a queue the connections go to
// the waiters, before keys). /metrics has each server's entries
// (spindle_proxy_server_hash_entries: its share of the keys over
// table_size); -check and /debug/config show the hash section with its
// defaults.
//
// hash's balance_factor (default 0: none; from 100 to 1000) bounds the
// servers' loads, as consistent hashing with bounded loads (Mirrokni,
// Thorup and Zadimoghaddam, SODA 2018) and HAProxy's hash-balance-factor
// do: a key's walk passes over a server whose connections in flight
// (spindle_proxy_server_active: mode http's requests to it, an h2c
// pool's streams, mode tcp's connections), with this one, would be more
// than balance_factor percent of its weight's share of those of all the
// servers up, rounded up (125: a quarter above its share at most), so
// that a key hot enough to load its server past the others spills to
// the next entries' servers, and comes back as the load falls. The
// loads are the loops' gauges read with atomic loads (no lock), summed
// at each server the walk looks at. Some server up is always under the
// bound (the bounds add up to the loads at least), and one passed over
// is taken still where every other one is down, refuses or is full. A
// request that would reuse an idle connection to a server over the
// bound walks on too.
//
// The data path keeps its state per loop and takes no lock: each loop has
// its own round-robin state (current weights, a cursor) and connection
// counts per server (least-conn picks among the loop's own), and its own
// counters, which the admin server sums. Reading a side stops while its peer's queue holds
// engine.write_high_water of buffer memory (default 256 KiB: see
// EngineConfig.WriteHighWater) and resumes when the peer drains;
// a side whose peer takes nothing of its queue for engine.write_timeout
// (default 60s: see EngineConfig.WriteTimeout) is reset, and one closed
// whose queue has not drained close_timeout (default 30s) after is reset
// too, and either takes the other side with it; a side's
// FIN is passed on to the other (half-close), and a reset or error on one
// side closes the other. A server that refuses or times out is skipped for
// the next one of the pool, each server tried at most once per client.
//
// Health checks, when a pool has them, are made off the loops (a
// goroutine per server), each server on its own schedule every interval
// (one that answers nothing holds back no other): with type tcp
// (the default) a TCP connect; with type http a request "GET <path>
// HTTP/1.1" with Host (host, default the server's address as configured),
// "Connection: close" and "User-Agent: spindle-health", whose response
// head (up to 16 KiB, the body unread) must arrive within the timeout
// (which covers the connect) and carry a status expect lists (default
// "200-399"; codes and ranges, comma-separated; interim 1xx heads are
// skipped): a refused connect, a malformed, oversized or unfinished head,
// or another status fails. Rise and fall
// consecutive results move a server up or down, and the loops read that
// state with an atomic load. A down
// server gets no new connections; a client for whom no server is up is
// closed and counted.
//
// A pool's checks are spread over the interval rather than sent in one
// burst (HAProxy spreads a backend's first checks and has spread-checks
// for the rest): when its checks start (New's Run, or a reload that
// changed the pool), the i-th of its n servers (from 0, as listed) is
// first checked i/n of the interval later, and each wait between two
// checks of a server is the interval give or take up to 5 % at random,
// the interval on average, so that proxies started or reloaded together
// drift apart rather than check each server in the same instant. A
// pool's last servers are so first checked up to an interval after the
// start, and count as up until then, as every server does until its
// checks say otherwise.
//
// Passive health, when a pool has it, watches the data path's own
// connects: fails consecutive failed connects to a server (refused or timed
// out, counted over every loop with per-server atomics, no lock) eject it
// for cooldown. After the cooldown it takes connections again and its next
// connect decides: a success clears the count, a failure ejects it for
// another cooldown. The two combine by "and": a server is up only while
// neither the active checks nor passive health mark it down (a passed
// check does not end an ejection, and an ended ejection does not raise a
// server the checks hold down).
//
// With http_errors (pools of mode http listeners) passive health also
// watches the HTTP exchanges, as Envoy's outlier detection and HAProxy's
// observe layer7 do: http_errors consecutive failed exchanges with a
// server eject it, though it accepts connections. A failed exchange is a
// response with a status http_error_statuses lists (from 500 to 599;
// default "500,502-504,506-599": every 5xx but 501 and 505, answers to the
// request's method and version, which a client chooses: counting them
// would let any client eject the servers), no response head within
// response_timeout once the whole request reached the server (a body the
// client stalls is the client's doing; a request that waited for room at
// an h2c server gave it less of it), a close or reset before a complete
// response head (but an h2c server's RST_STREAM CANCEL or NO_ERROR on a
// stream, which ends it on purpose: a gRPC server's at a deadline the
// client chose), or a response head the proxy refuses whatever the
// request was (malformed or oversized, its framing fields among them; a
// 101 unasked or to a protocol not offered; more interim 1xx than 16): in
// the access log, such a status from upstream, ST, SD before a response,
// PH, and SR before a response but for those two codes. A chunked
// response to an HTTP/1.0 request, refused too (PH), neither counts nor clears the count: the client chose the version, and
// would eject a server that answers HTTP/1.1 clients well. Another
// response clears the count, and one after an ejection has run out ends it
// (a connect's success does not: the server's answers decide); a request
// retried because its kept-alive connection was closed under it counts
// once, by its retry's outcome (a retry policy's tries count each: see
// retry below); what follows a response head (a body cut
// short) is not counted. The counts are apart: failed connects do not add
// to http_errors' count, nor failed exchanges to fails'.
//
// An ejection lasts cooldown times the server's ejections in a row (2x,
// 3x, ...) up to max_cooldown (Envoy's base_ejection_time and
// max_ejection_time), and the server's first success after one brings
// the next back to cooldown. max_cooldown defaults to 10 cooldowns with
// http_errors, and to cooldown without it: a passive section from before
// http_errors keeps its constant cooldown. max_ejected_percent (default
// 100) bounds the share of a pool's servers out at once that passive
// health ejects to, those the active checks hold down counted with those
// ejected: the servers' number times the percent over 100, rounded down,
// but at least 1 (as Envoy) and, below 100, all servers but one at most,
// so passive health never ejects the last server up (the checks may still
// take it down); 0 ejects none (passive health counts, to watch before
// enforcing). An ejection the bound refuses is counted
// (spindle_proxy_pool_passive_ejections_refused_total), each time. Under a
// bound below 100 an ejection is decided under a per-pool flag taken
// without waiting: a loop that finds another deciding one at that instant
// leaves its server's to its next failure. /metrics has each server's
// ejections by reason (spindle_proxy_server_passive_ejections_total
// {pool,server,reason="connect"|"http"}: the reason label is new, its sum
// is the series before it) and its counts of failures in a row
// (spindle_proxy_server_passive_consecutive_failures, by reason). A
// connect's or an exchange's outcome that comes after a reload changed
// its pool (the connect or the request begun before) is judged by the
// passive section in force for the server: its thresholds, its
// max_ejected_percent over the pool's servers in force, and its
// http_error_statuses.
//
// A listener with mode http is an HTTP/1.1 reverse proxy:
//
//	listeners:
//	  - name: gw
//	    listen: ":8081"
//	    mode: http
//	    pool: app              # requests no route matches
//	    routes: [{host: "api.example.com", path_prefix: "/v1/", pool: api}, {host: "*.example.org", pool: app}]
//	    request_timeout: 30s   # the whole request head, else 408
//	    response_timeout: 60s  # request sent to response head (and between reads), else 504
//	    keepalive_timeout: 60s # idle client between requests
//	    max_request_body: 0    # bytes, 0: no bound (else 413)
//	    idle_timeout: 0s       # an upgraded (101) tunnel's, as in mode tcp; 0: none
//	    upgrades: [websocket]  # protocols a request may upgrade to; []: none
//	    trusted_proxies: ["10.0.0.0/8"]  # clients whose X-Forwarded-* are believed; default none
//	    headers_with_underscores: allow  # request fields named with '_': allow, drop or reject (400)
//	    abort_on_close: false  # a client's FIN before the response head ends the request too
//	pools:
//	  - name: api
//	    servers: ["10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"]
//	    max_idle: 16
//	    idle_timeout: 60s
//	    # 5 failed exchanges in a row (5xx, timeouts, resets) eject a server
//	    # for 10s, 20s, ... up to max_cooldown; at most half the pool at once
//	    passive: {fails: 3, cooldown: 10s, http_errors: 5, max_cooldown: 100s, max_ejected_percent: 50}
//
// Each client connection is a state machine on its loop: it parses one
// request head (internal/h1, strict against request smuggling, bounded;
// the head is copied only while it arrives in parts), answers a bad one
// with the parser's status and a close, CONNECT with 501, and a target
// whose path has dot-segments ("/api/../admin", also as %2E, or across
// "%2F", "%5C" or a backslash, or before a path parameter: "/api/..;/x",
// Tomcat's "/api/../x") with 400, since routes match the target as
// received and the server would resolve it elsewhere; routes it
// (first route whose host, exact and case-insensitive without the port or
// a "*." suffix, an IP address as an address: "[0::1]" is "[::1]",
// "[::ffff:127.0.0.1]" is "127.0.0.1", and path prefix match; else the
// listener's pool); writes
// a new head without the hop-by-hop headers (Connection and those it
// names, Keep-Alive, Proxy-Connection, TE, Upgrade), with
// X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Host and Via: 1.x
// spindle (see below); and sends it over an idle
// keep-alive connection to the first server up from the loop's pool, or a
// new one (failover over the pool as in mode tcp; an HTTP/1.0 request goes
// as HTTP/1.0 with Connection: keep-alive, so that the server frames its
// response for a 1.0 client). Bodies pass in their framing (a chunked one
// as it is): whole received buffers, and a buffer's tail after a head, go
// without a copy (engine.Conn.WriteBufferFrom); only a body that ends
// inside a buffer is copied. One request per client is in flight: the
// client is not read meanwhile (but while the request waits for a
// server, below), and pipelined requests are taken in turn (the next
// one once the client's queue is below write_high_water: a client closed
// while one is held so, by a drain, a reload or keepalive_timeout, is
// closed lingering, its queue sent first and what it still sends read
// and dropped, the held request not answered). A client's FIN while its request waits in the pool's queue for a slot ends the
// request there (CD in the access log); anywhere else a FIN is a half
// close: the response is awaited and sent, and then the client closed
// (a client that sends its request and then its FIN, printf ... | nc -N,
// is answered whether its request found an idle connection or needed a
// connect). With abort_on_close: true a FIN before the response head
// ends the request wherever it is: while it connects or, to an h2c pool,
// waits for a stream (its connect let go of, as HAProxy's option
// abortonclose), and once it reached its server (nginx's default), the
// server's connection reset (not pooled; to an h2c pool, its stream).
// The client is read for its FIN while its request so waits, where it
// sent nothing past the head (a body's start or a next request is held,
// and a FIN behind it is seen at the request's turn).
// The response head is rewritten the same way (with Connection: close
// when the client's connection ends after it: the request asked for it,
// its body was not all read, the response runs until the server closes,
// or a stop); 1xx responses are passed on to HTTP/1.1 clients, and a 101
// to a request with Upgrade turns the two connections into an L4 tunnel.
// Only the protocols in upgrades (default websocket) are asked for: a
// request for another (h2c above all: HTTP/2 cleartext through the proxy
// would reach the server past its routes and bounds) goes without it, as
// a plain request (and without HTTP2-Settings), and a 101 to a protocol
// not allowed, or to a request that asked for none, gets the client 502.
// At a response's end the upstream connection goes back to the loop's
// idle pool (max_idle per server, closed after idle_timeout, or when the
// server closes it or sends unasked bytes) if the response and the
// request both ended cleanly and the server keeps it; else it closes.
// Failures before the response: a server that cannot be connected gets the
// client 502 (503 with none up); a kept connection the server closes
// before the response head is retried once on a new connection for a GET,
// HEAD or OPTIONS without a body, else 502; after response bytes were
// sent the client is reset. Each side's reading stops while the other's
// write queue holds the high-water mark, as in mode tcp. A stop closes
// idle clients and pooled connections at once, and others after their
// current response. max_request_body bounds request bodies (a longer
// Content-Length gets 413; a chunked body is cut when it grows past it:
// the server's connection reset, the client 413 or, once the response has
// begun, a reset). Not there: TLS, HTTP/2 beyond h2c to clients (below),
// caching, routing rules beyond host and path, limits on response body
// sizes.
//
// A mode http listener and its routes may change what goes upstream and
// what the clients get, as Envoy's request_headers_to_add/_to_remove,
// response_headers_to_add/_to_remove, prefix_rewrite and
// host_rewrite_literal, HAProxy's http-request set-header, del-header and
// replace-path and nginx's proxy_set_header do:
//
//	listeners:
//	  - name: gw
//	    listen: ":8081"
//	    mode: http
//	    pool: app
//	    request_headers: {add: {X-Via-Gateway: gw}}  # every request of the listener
//	    response_headers: {set: {Cache-Control: no-store}}
//	    routes:
//	      - {path_prefix: /api/, pool: api, rewrite_prefix: /, host_rewrite: "api.internal:8080",
//	         request_headers: {set: {X-Env: prod}, add: {X-Tag: a}, remove: [X-Debug]},
//	         response_headers: {add: {X-Route: api}, remove: [Server]}}
//
// remove drops every field of its names, set replaces every field of its
// names with one (or adds it), add appends one field (names are tokens,
// compared case-insensitively and with '_' read as '-': see
// headers_with_underscores below; a name is in one of the three at most;
// values are static strings, with no variables: the client's address is
// X-Forwarded-For's); the listener's rules come first, then the
// matched route's (so a route's remove drops what the listener's set or
// add wrote; a request no route matches gets the listener's alone). The
// fields the rules write follow the message's own, set's then add's,
// each by name. They are taken after trusted_proxies has dropped an
// untrusted client's forwarding fields, and cannot name the fields the
// proxy writes from the client's connection (X-Forwarded-For,
// X-Forwarded-Proto, X-Forwarded-Host, Via: trusted_proxies decides
// them), nor the framing and hop-by-hop ones (Content-Length,
// Transfer-Encoding, Connection, Keep-Alive, Proxy-Connection, TE,
// Trailer, Upgrade, HTTP2-Settings), pseudo-headers, or Host
// (host_rewrite is the way); a value with a control character but HTAB
// (CR, LF, NUL) or leading or trailing whitespace is refused, and so are
// a set's and add's fields ("Name: value\r\n" each) past 16 KiB together
// (the largest head the proxy reads; a listener's and a route's each),
// the error naming the rule that passes it. Response
// rules apply to the final response from upstream and to the 101 that
// turns an upgrade's connections into a tunnel, the last HTTP response on
// them (no final response follows to carry the rules' fields: HAProxy's
// http-response rules apply to a 101 since 1.5, nginx's add_header with
// always too); not to an interim 1xx (100, 103: the final response gets
// them), nor to trailers but by their drops, nor to the
// proxy's own responses (400, 502, 503, ...: a rule's field describes
// the servers' answers, which those are not; Envoy applies its rules to
// its local replies too).
// Request rules add and set in the head alone; the fields they remove
// or set are dropped from a request's trailer section too (a server
// merging trailers into the head would read there the field a rule took
// out of it; Envoy and HAProxy leave trailers to the server), beside the
// fields no trailer may carry to a server (see request trailers below);
// so are response rules' from a response's (see below).
// rewrite_prefix replaces the route's path_prefix in the target sent
// upstream, the rest and the query kept: "/api/" and "/" send
// "/api/x?q" as "/x?q" and "/api/" as "/"; "/api" and "/v2" send "/api"
// as "/v2", "/api?x" as "/v2?x" and "/apis" as "/v2s" (path_prefix
// matches bytes, a percent-encoded unreserved character as the
// character and a run of '/' as one: "/%61pi/x" and "//api//x" are sent
// as "/x" too). An absolute-form target keeps its form (with
// host_rewrite as its authority; an empty path, which path_prefix "/"
// matched, is rewrite_prefix, but an OPTIONS's, which asks about the
// server as "*" does), and OPTIONS * goes as it is. The target
// after the rewrite has no dot-segment or "//" the check above would
// have refused: a rewrite_prefix with one is refused (a backslash, %2F
// and %5C counting as "/", as the check has them), and so is one
// ending in a segment separator ("/", "\", %2F, %5C) for a path_prefix
// not ending in "/" ("/api" to "/" would send "/api/x" as "//x" and
// "/api./x" as "/./x"), as is any for a path_prefix with a '?' or '#'
// (the check does not read a query: "/api?" to "/v2" would send
// "/api?/../x" as "/v2/../x"). host_rewrite replaces the Host field
// (:authority to an h2c pool); X-Forwarded-Host keeps the request's host.
// Routes match, and the access log writes, the request as received.
// Every client and pool protocol pair behaves the same, an HTTP/2
// client getting the names in lower case. The rules are compiled when
// the config is loaded into the bytes written ("Name: value" lines for
// HTTP/1.1, lower-case names for HTTP/2): applying them takes no
// allocation. A reload's rules apply to the requests routed after it,
// on the connections open before it too.
//
// A mode http listener with h2c takes HTTP/2 clients with prior knowledge
// (cleartext, RFC 9113 3.3) next to HTTP/1.1 ones on the same socket:
//
//	listeners:
//	  - {name: gw, listen: ":8081", mode: http, pool: app, h2c: true,
//	     h2_max_concurrent_streams: 100, h2_initial_window: 65536,
//	     h2_response_hold: 6553600}
//
// A client whose first bytes are the client preface (over any number of
// reads) speaks HTTP/2 on an internal/h2 Server; at the first byte that
// differs it is an HTTP/1.1 client as without h2c. Each stream is one
// request forwarded as HTTP/1.1, as an HTTP/1.1 request is: the same
// checks (CONNECT 501, dot-segments 400, max_request_body 413), routes
// (by :authority, else host, and :path; a request with neither is 400,
// and so is one HTTP/1.1 cannot carry as it is: an :authority (host)
// that is not host [":" port], a :path with a fragment, a '%' not
// followed by two hex digits or a byte past ASCII, a field name that is
// not a token, a control character but HTAB in a value; such trailers
// reset the stream),
// route names and counters, forwarding fields after trusted_proxies (and
// Via: 2.0 spindle), over the pool's keep-alive connections (the loop's
// idle ones, else a dial with failover, and passive health), one upstream
// connection per stream in flight. Host is written from :authority,
// cookie crumbs are joined into one field; a request body goes with
// Content-Length where the request had content-length, else chunked (a
// request ended by its HEADERS has none), its trailers as the chunked
// body's. The response's status and fields but the connection-specific
// ones (Connection and what it names, Keep-Alive, Proxy-Connection, TE,
// Transfer-Encoding, Upgrade) are its HEADERS, its body (framed by
// Content-Length, de-chunked, or up to the server's close, whose
// connection is then not reused) DATA ending with END_STREAM, a chunked
// body's trailers a trailing HEADERS; 1xx responses (100 Continue to a
// request with expect: 100-continue, 103) are passed on as interim
// HEADERS, and a 101 gets the stream 502 (HTTP/2 has no Upgrade).
// Backpressure is flow control: a stream's DATA is returned to the
// client's windows (h2.Server.Consumed) only once its upstream
// connection's queue is below the high-water mark, and an upstream is
// not read while its stream's or the connection's send window, or the
// client's queue, is full. h2_initial_window (default 64 KiB, from 65535
// to 2^31-1) is each stream's receive window: the body a stream may have
// on its way that its upstream has not taken, which the proxy holds
// while the upstream connects (the connection's window, 1 MiB, bounds
// all streams'); a larger one helps only a single upload over a long
// round trip. h2_max_concurrent_streams (default 100) bounds the streams
// in flight per connection, each holding an upstream connection; the
// other bounds on abuse (rapid reset, CONTINUATION and control frame
// floods, HPACK bombs, a client that does not read) are internal/h2's
// defaults. A failed upstream (every connect failed, a close or reset
// before the response head, response_timeout) gets its stream 502 or
// 504, or a reset (RST_STREAM) once the response has begun; other streams
// go on. A stream the client resets closes its upstream connection
// (never pooled mid-exchange); a client connection that closes closes all
// of its streams' upstreams. keepalive_timeout closes a connection with
// no stream open for that long (GOAWAY first); response_timeout runs per
// stream as for HTTP/1.1, and not while a full window or the client's
// queue holds the stream's upstream: a send window (the stream's or the
// connection's) that stays shut for write_timeout gets the stream reset
// and its upstream closed, as a client that stops reading its queue is
// reset after write_timeout; request_timeout bounds the preface's
// arrival as it does a first head (a header block is bounded by
// internal/h2, and the time a connection may spend with no stream open
// by keepalive_timeout). A drain, or a reload that removes or replaces
// the listener, sends GOAWAY: the streams open finish, then the
// connection closes. That GOAWAY, and keepalive_timeout's, goes in two
// phases (RFC 9113 6.8): one naming 2^31-1 and a PING, so that the
// requests the client sent before it saw it are served, then, at the
// PING's ACK or a second later, the final one naming the last stream. /metrics counts HTTP/2 connections, streams and
// resets by who reset (spindle_proxy_listener_h2_connections_total,
// _h2_streams_total, _h2_resets_total{by="client"|"proxy"}); streams
// count in the listener's requests and responses too. The access log has
// a line per stream, with proto HTTP/2.0. Not there: the h2c upgrade from
// HTTP/1.1 (Upgrade: h2c; see upgrades: prior knowledge only). Over TLS
// a client speaks HTTP/2 where ALPN chose h2 (below), as an h2c client
// does here, and h2c itself is refused on a listener with tls. HTTP/2 to
// the servers, and with it gRPC, is a pool's protocol (below).
//
// A listener with tls terminates TLS (TLSConfig), in either mode:
//
//	listeners:
//	  - name: https
//	    listen: ":8443"
//	    mode: http
//	    pool: app
//	    tls:
//	      cert_file: /etc/spindle/example.com.pem   # the chain, leaf first; the default certificate
//	      key_file: /etc/spindle/example.com.key
//	      certificates: [{cert_file: /etc/spindle/api.pem, key_file: /etc/spindle/api.key}]   # picked by SNI
//	      min_version: "1.2"          # or "1.3"; default 1.2
//	      alpn: [h2, http/1.1]        # mode http's default; mode tcp offers none by default
//	      handshake_timeout: 10s      # default 10s
//	      max_handshakes: 4096        # in progress, over the loops; default the engine's 1024 a loop, -1 none
//
// The engine does the TLS (engine.ListenConfig.TLS: crypto/tls, the
// handshake on a goroutine of its own, then the record layer on the
// loop), and the listener sees plaintext: mode tcp forwards the client's
// decrypted bytes to a plain server as they are (the server's encrypted
// back; the client's close_notify is the server's FIN, while its FIN
// without close_notify, which anyone on the path can send, resets the
// server and the client, logged CD, also in a tunnel after an Upgrade;
// a server being connected to gets it once connected, as it gets what
// the client sent meanwhile), mode http serves
// HTTP/1.1, or HTTP/2 to a client ALPN gave h2 (RFC 9113 3.2), on the
// h2c paths above (h2_max_concurrent_streams and h2_initial_window
// apply; a client with h2 still has to send the preface), and its
// servers get X-Forwarded-Proto: https (see the forwarding fields). A
// client counts as accepted (and against max_conns and rate_limit) once
// its handshake has succeeded; one whose handshake fails (not TLS, an
// alert, no version, cipher suite or protocol in common, past
// handshake_timeout) is closed, counted in
// spindle_proxy_listener_tls_handshake_failures_total and logged (the
// listener, the client's address, crypto/tls's reason; a line a second
// at most for each listener, with the number held back since), and the
// listener goes on.
// At most max_handshakes are in progress on the listener (the engine's
// ListenConfig.MaxHandshakes: from the accept until the handshake
// succeeds, fails or times out): a client that connects past it is reset
// at once, before any handshake, and counted in
// spindle_proxy_listener_tls_handshakes_refused_total{listener} (which a
// reload keeping the listener's socket and counters keeps, and one
// making a new listener on the socket, another mode or name, starts
// again from the moment the reload puts it in force) and in
// spindle_proxy_engine_tls_handshakes_refused_total, every listener's
// since the start, those a reload removed included, as before
// (spindle_proxy_engine_tls_handshakes is those in progress), so that
// clients that connect and say nothing hold a bounded number of
// goroutines and buffers for handshake_timeout.
// A listener offering h2 takes, in TLS 1.2, only the cipher suites
// HTTP/2 allows (ECDHE with AES-GCM or ChaCha20-Poly1305: RFC 9113 9.2.2
// prohibits the rest, CBC's among crypto/tls's defaults), whatever
// protocol a client asks for: a TLS 1.2 client with none of them fails
// its handshake (TLS 1.3's suites are all allowed). A client ALPN gave h2
// has agreed to HTTP/2: one whose first bytes are not the HTTP/2 preface
// (an HTTP/1.1 request) is closed without an answer (a connection error,
// RFC 9113 3.4), counted in
// spindle_proxy_listener_h2_preface_failures_total and logged (the
// listener, the client's address, the count of its first bytes and, where
// they begin with an HTTP/1.x request line, its version and method, not
// the target nor anything after it, which may hold a credential; a line
// a second at most for each listener, apart from its failed handshakes'),
// and a client ALPN gave http/1.1, or none, is HTTP/1.1
// whatever it sends (the preface gets an HTTP/1.1 error: over TLS only
// ALPN chooses HTTP/2, RFC 9113 3.3). crypto/tls picks the certificate by the
// client's server name among cert_file's and certificates' (the first
// whose leaf matches, wildcards included), else the first. New and every
// Reload read the certificate files (Validate, and so -check, too,
// naming a file that cannot be read, holds no PEM block of its kind or a
// key that is not the certificate's): a reload (SIGHUP) after a renewal
// gives the next handshakes the new certificates, on the socket it keeps,
// the connections open keeping their sessions, and a client may resume
// its session across it (the socket's session ticket keys stay). It may
// change the certificates, min_version and alpn, not turn tls on or off
// or change handshake_timeout or max_handshakes on a socket it keeps
// (they are set when a socket opens): that is refused, naming the field.
// A client whose handshake chose h2 before a reload that took h2 off
// alpn, and ended after it, is served HTTP/2 with the h2 settings of the
// last config that offered h2 on the socket.
// Not there: client certificates (mTLS) from clients, OCSP stapling, and
// the choice of cipher suites (crypto/tls's defaults, but for h2 above)
// or curves; the access log has no field for TLS (mode http's proto is
// the HTTP version).
//
// A pool with tls connects to its servers over TLS, in either mode (the
// engine's Loop.DialTLS: crypto/tls's client, its handshake bounded with
// the connect by the listener's connect_timeout, and for protocol h2 the
// server's SETTINGS with them: see h2c below):
//
//	pools:
//	  - name: app
//	    servers: ["backend-1.internal:8443", "10.0.0.7:8443"]
//	    protocol: h2                   # HTTP/2 over TLS (ALPN h2); http1 (default) offers no ALPN
//	    tls:
//	      server_name: app.internal    # SNI and the name checked; default each server's host as configured
//	      ca_file: /etc/spindle/internal-ca.pem   # default the system's roots
//	      cert_file: /etc/spindle/proxy.pem       # the proxy's certificate, for servers that ask (mTLS)
//	      key_file: /etc/spindle/proxy.key
//	      min_version: "1.2"           # or "1.3"; default 1.2
//	      # insecure_skip_verify: true # any certificate: no protection from the path; tests only
//
// A server's name is, without server_name, its host as the config gives it
// (a name before it is resolved; an IP address is checked against the
// certificate's IP addresses, and sent as no SNI). A connect whose
// handshake fails (an untrusted or expired certificate, a wrong name, a
// server that is not TLS or refuses the proxy's certificate during the
// handshake, a timeout) is a failed connect as a refused one is: the next
// server is tried, retries and passive health (fails) count it, and it is
// counted in spindle_proxy_server_tls_handshake_failures_total besides
// spindle_proxy_server_connect_failures_total and logged, one line a
// second at most for each pool with the number held back since (the
// pool, the server and crypto/tls's error). Over TLS 1.3 a server that refuses the proxy's
// certificate says so after the client's side of the handshake is done:
// that connect succeeds, and the server's alert ends it as a server's
// close before the response (502; passive http_errors counts it). Protocol
// h2 is h2c over TLS (its knobs are h2c's): the proxy offers h2 alone by
// ALPN, and a server that does not choose it (crypto/tls servers without
// ALPN go on without one) fails the connect, counted and logged as a
// handshake failure, before the preface is sent. h2c refuses tls and h2
// needs it. A response framed by the end of the stream (HTTP/1.1
// without a length) ends with the server's close_notify: one a TLS
// server's FIN ends without it, which crypto/tls takes for the end but
// anyone on the path can send (a truncation), is passed on as cut short,
// as one cut inside its length is (the client reset, or its HTTP/2
// stream); in mode tcp (and a tunnel after an Upgrade) such an end resets
// the client instead of ending its stream, and the server too where the
// client's stream is still open (not close_notify, which would end it
// whole). Protocol http1 offers no ALPN (a mode tcp listener's pool
// carries whatever its clients speak), but behind a mode tcp listener
// whose client chose a protocol by its tls.alpn, that protocol alone is
// offered, so that the server speaks what the client was told: a server
// that takes ALPN but not that protocol fails the handshake (a failed
// connect, the next server tried), one without ALPN goes on without it.
// The health checks of a TLS pool
// connect and handshake with the same configuration (type tcp passes on a
// completed handshake, with h2 chosen for protocol h2; type http sends its
// request over it, :scheme https to h2), and a check whose handshake
// succeeded ends its connection with close_notify, so that the server
// logs no truncated connection, but where its timeout has passed: the
// check closes the socket at its timeout, close_notify's write included
// (crypto/tls would give that 5 s of its own, which a server reading
// nothing would hold the check for). Each server has a session cache
// (resumption across connections and loops, and across a reload that
// keeps the server and the proxy's certificate: a session resumed would
// show the server the certificate it was made with, so a renewed one
// starts the cache again). The files are read by Validate (-check names one that
// cannot be read, holds no certificate, or a key that is not the
// certificate's), by New and by each Reload: a reload (SIGHUP) after a CA
// or client certificate renewal gives the next connections the new ones;
// those open keep theirs. Not there: CRLs or OCSP for the servers'
// certificates, pinning, and ALPN other than h2 for protocol h2.
//
// A pool with protocol h2c (of mode http listeners only: a mode tcp
// listener's pool is refused) speaks HTTP/2 with prior knowledge to its
// servers, as gRPC servers want (Envoy's http2_protocol_options, nginx's
// grpc_pass, HAProxy's proto h2):
//
//	pools:
//	  - name: grpc
//	    servers: ["10.0.0.5:50051", "10.0.0.6:50051"]
//	    protocol: h2c                  # default http1
//	    balance: least-conn            # counts streams in flight
//	    h2_max_concurrent_streams: 100 # per connection, and at most the server's SETTINGS_MAX_CONCURRENT_STREAMS
//	    h2_max_connections: 4          # per server and loop
//	    idle_timeout: 60s              # a connection with no stream open is closed after it
//	    h2_ping_interval: 30s          # PING a connection silent this long (default 0: none)
//	    h2_ping_timeout: 15s           # no ACK within it: the connection is dead (default 15s)
//
// Each loop keeps its own multiplexed connections to each server
// (internal/h2's Client on a connection the loop dials; no lock, nothing
// shared between loops). A request picks a server by the pool's balance
// (least-conn counts the streams in flight to it, weights as ever), then
// the first of the loop's connections to it with room (fewer streams
// than the lower of h2_max_concurrent_streams and the server's
// SETTINGS_MAX_CONCURRENT_STREAMS, which it waits for before opening
// any), else dials another while fewer than h2_max_connections are open
// (and those still connecting would not take it), else waits for a
// stream to end; the wait counts in response_timeout (504), which runs
// on as the stream goes to the server, not again from there: one
// response_timeout from the request's arrival to the response head, the
// wait and the connect included, as Envoy's route timeout counts the
// wait for its connection pool (TestH2UpQueueWaitCountsInResponseTimeout;
// a retry's from its start).
// per_try_timeout bounds a try from its start at the server, a wait
// before it counting in response_timeout only
// (TestH2UpQueueWaitNotInPerTryTimeout). A 504 after a wait for a stream
// to end is not held against the server by passive health, nor is the
// try a retry on response-timeout gives up after one: it had less than
// response_timeout (TestH2UpRetriedTimeoutAfterQueueWaitNotCounted);
// once its wait starts again at the server (a body read, an interim
// head), it counts, the server having all of response_timeout from there
// (TestH2UpTimeoutAfterInterimCountedAfterQueueWait). An HTTP/1.1
// client's body that comes while its request waits is read as it comes,
// a buffer's worth, as an HTTP/2 client's is within its window: its read
// moves the wait on there, the server not having it yet
// (TestH2UpQueueWaitCountsInResponseTimeoutWithBodyLater); what comes
// past that buffer stays in the socket until the stream starts, and its
// read, at the server, moves the wait on from then, as a body held back
// by a full socket buffer is read as the client sends it. A server
// that cannot be connected is skipped for the next (502 when none is
// left, 503 when none is up), as for HTTP/1.1. Connecting takes the
// server's SETTINGS, the first frame of its side of the connection:
// they are due within the listener's connect_timeout of the dial, which
// bounds the connect, the TLS handshake (protocol h2) and them together.
// A connection without them by then (a hung server, or an HTTP/1.1
// server reading the preface as the start of a request and waiting for
// the rest), or that ends before them (a server closing it, or answering
// something other than HTTP/2), is a failed connect as a refused one is:
// closed, counted in spindle_proxy_server_connect_failures_total and by
// passive health (fails; only the connection's first stream counts as
// the connect's success), and the requests waiting for it go to the next
// server, else get 502 (SC). So is a connection set up that takes none
// of the requests waiting for it: its SETTINGS allow no stream
// (MAX_CONCURRENT_STREAMS 0), or its server ends it first (a GOAWAY
// naming no stream processed, as a server shutting down that still
// accepts sends with its SETTINGS; its close or reset). No connection
// is dialed in its place for them, as one is for a connection that
// carried streams: dialed again at once, again and again, a server
// doing so on every connection had them wait for response_timeout
// (504) through thousands of connections. The back-off from such a
// server is that of failed connects: each request tries it once at
// most, and passive health ejects it after fails for a cooldown. A
// connection left with no stream for idle_timeout is closed (GOAWAY
// first).
//
// With h2_ping_interval, a connection that has received nothing from its
// server for that long, idle or carrying streams, is sent a PING (8 bytes
// of its own, the ACK matched by them), as Envoy's
// connection_keepalive and Go's ReadIdleTimeout do; without the ACK
// within h2_ping_timeout the server or the path to it is gone (a host
// gone silent, a middlebox dropping the flow), and the connection is
// closed at once, without GOAWAY: its streams end as a dying
// connection's do (below: 502 before the response head, a reset after
// it, counted by passive health), its server's waiters go to another
// connection or server. Without it, such a connection is found only by
// a TCP error, write_timeout or response_timeout, and an idle one is
// handed new streams that then wait. It is off by default: a gRPC
// server's keepalive policy (grpc-go's: a PING more often than every 5
// minutes with streams open, every 2 hours without, unless its
// enforcement policy permits more) answers too many PINGs with GOAWAY
// ENHANCE_YOUR_CALM, so it is set to what the servers permit. The loop's
// one timer (that of idle_timeout) does it: no timer or allocation per
// connection or PING.
//
// An HTTP/2 client's stream goes as a stream, not re-framed (h2→h2): its
// method, path and :authority (the host it was routed by), :scheme
// (below), its fields but host and those an untrusted client may not
// forge, then the forwarding fields as for an HTTP/1.1 server (X-Forwarded-For,
// -Proto and -Host after trusted_proxies, Via: 2.0 spindle; te: trailers
// passes, as gRPC needs); its DATA and trailers pass as DATA and
// trailers, and so does the response, with via added to its head. The
// checks of an HTTP/2 client's request are those above (a request
// HTTP/1.1 could not carry is refused though HTTP/2 would carry it). Flow
// control is the backpressure both ways: a side's DATA is Consumed (its
// window returned) only once the other side took it (its connection's
// queue below the high-water mark), so a slow reader holds at most a
// stream's window of the other side's bytes in the proxy: the client's
// h2_initial_window of a request body, 64 KiB (the proxy's window to the
// server) of a response; an upstream connection's window is its streams'
// (h2_max_concurrent_streams times 64 KiB, at least 1 MiB, at most
// 2^31-1), so that clients not reading do not stall the other streams on
// their connection. Each stream to the server may so make the proxy hold
// 64 KiB, its window, which the server may fill unasked: withholding
// WINDOW_UPDATE bounds a stream past it only. A listener's
// h2_response_hold (from 64 KiB to 2^31-1) bounds what one
// client connection may make it hold of responses from h2c pools: each of
// its streams with a stream to a server counts that window, one whose
// response has all come (its server stream let go of at once: a client
// not reading holds none of the server's h2_max_concurrent_streams) the
// part of it not yet taken; a stream that would pass it waits before it
// goes to a server until the client takes what is held, response_timeout
// running (504, logged CT). It runs on once the stream goes to the
// server, not again from there: one response_timeout from the request to
// the response head, the wait included (a 504 then is logged ST, not
// held against the server by passive health: it had less than the
// whole). What the client's write queue holds past the
// high-water mark counts as held too: responses that went there whole,
// within the windows of a client that does not read its socket. Its
// default, h2_max_concurrent_streams times 64 KiB (6.4 MiB at theirs),
// makes no stream wait, and bounds the write queue of a client that does
// not read its socket besides. Set lower it bounds such a client tighter
// at the cost of its streams to h2c pools at once: at 1 MiB a client with
// more than 16 (a gRPC client's long-lived streams) has those past it
// wait for the others to end. /metrics has what the windows hold
// back now per listener (spindle_proxy_listener_h2_response_held_bytes).
// A client's RST_STREAM resets the upstream stream
// (CANCEL), and a server's RST_STREAM resets the client's stream with its
// code, before the response head as after it (NO_ERROR as CANCEL, as a cut
// response must not look whole; a gRPC server's CANCEL at a deadline so
// reaches its client, which takes it for DEADLINE_EXCEEDED), logged SR; an
// HTTP/1.1 client gets 502 before the head (nothing else can carry a
// reset) and its connection reset after it. A server that answered whole
// before the request's body ended, then reset with NO_ERROR (it does not
// need the rest, RFC 9113 8.1), is not a reset: an HTTP/2 client gets
// the whole response, then RST_STREAM NO_ERROR, and stops sending; an
// HTTP/1.1 client gets the whole response, then its connection closed
// (lingering; the rest of its body is not read: framing the next request
// would mean reading it all). A stream the server did not process
// (REFUSED_STREAM, or above the last stream id of its GOAWAY, after which
// the connection takes no new stream, counts no more in
// h2_max_connections, another being dialed for the streams waiting, and
// closes once its streams end) is
// sent again, on another connection or server, up to 3 times, while no
// byte of its body was sent (a body sent is not kept to send again, but
// under a retry policy listing refused-stream: see retry below); a
// connection that dies resets its streams (502 before a response head,
// logged SD; a reset after it, INTERNAL_ERROR). Passive health counts as
// with HTTP/1.1: a response status http_error_statuses lists, a
// connection error or a server's reset before the response head (not a
// RST_STREAM CANCEL or NO_ERROR: the server ended the stream on purpose,
// and any client could eject a healthy gRPC server with short
// grpc-timeout values), response_timeout.
//
// A client's reset of a stream whose response has sent no DATA is an
// early reset to the server as well, and a server bounding those (rapid
// reset, CVE-2023-44487; internal/h2's Server ends a connection past
// 200, nginx, Envoy and others have bounds of their own) would end the
// connection with every other client's stream on it, though each client
// is within the proxy's own bound (200 per client connection): the
// clients share the upstream connections. So the proxy counts, per
// upstream connection, the streams it reset before their response sent
// DATA or ended, less one for each stream that ended both ways without
// a reset, as internal/h2's Server counts them, but with a status below
// 400 only (an error the server may have answered itself at no cost, as
// a spindle proxy's own answers give nothing back there); at 100, half
// internal/h2's default, the connection is retired as after a GOAWAY:
// it takes no new stream, its streams finish there and it closes after
// them, and new streams go to another connection (past
// h2_max_connections while it finishes). Counted in
// spindle_proxy_server_h2_reset_retires_total. A server whose bound is
// lower, or that counts otherwise (every reset, a share of the streams,
// a time window), may still end a connection before.
//
// The :scheme of a request to an HTTP/2 pool, an HTTP/2 client's or an
// HTTP/1.1 client's, is the proxy's connection's to the server: http to
// an h2c pool, https to an h2 pool (over TLS), whatever the client's
// connection. It is the scheme of the URI the proxy asks the server for
// (RFC 9113 8.3.1), as Go's http2.Transport (from the URL it dials) and
// nginx's grpc_pass (grpc://, grpcs://) set it, and the one an HTTP/1.1
// server behind the proxy reconstructs from its own connection (RFC 9112
// 3.3), so that a server sees one scheme over either protocol; the
// client's scheme is X-Forwarded-Proto's (the forwarding fields). Envoy
// passes the client's scheme on by default (its
// scheme_header_transformation match_upstream does as here), and so did
// the proxy before 2026-12-03: an h2 pool behind a plain listener got
// :scheme http over TLS, an h2c pool behind a TLS listener https.
//
// An HTTP/1.1 client's request to an h2c pool (as Envoy does; nginx only
// with grpc_pass) goes as a stream too: its head as HEADERS (Host as
// :authority, an absolute-form target's path as :path, "/" where it is
// empty but "*" for an OPTIONS with neither path nor query, RFC 9113
// 8.3.1; names in lower case, the hop-by-hop and framing fields
// left out, content-length where the body has Content-Length, the
// forwarding fields as ever, Via: 1.x spindle), its body's data (a
// chunked body's without its framing) as DATA, a chunked body's trailers
// as trailers. The response comes back as an HTTP/1.1 head with a
// reason phrase and Via: 2.0 spindle, with its content-length where the
// server sent one, else chunked (until the close to an HTTP/1.0
// client), its trailers as the chunked body's trailer section (dropped
// with Content-Length); the client's connection is kept alive as with an
// HTTP/1.1 server (the request body may go on after the response head,
// as HTTP/2 allows; a response that ends before the request's body
// does closes the client after it). A client gone before the response's
// end (its connection closed, a timeout) has the stream reset (CANCEL),
// as an HTTP/2 client's RST_STREAM does. Expect: 100-continue goes to the
// server as expect (as HAProxy does, and as to an HTTP/1.1 server; Envoy
// answers 100 itself unless told to pass it), which decides: its 100
// reaches the client, which then sends the body; a final response before
// a 100 and any body byte (the client will not send it) says
// Connection: close, and the client is closed after it. A request with
// Upgrade (a protocol upgrades allows) to
// an h2c pool is answered 501: HTTP/2 has no Upgrade, and the proxy does
// not speak extended CONNECT (RFC 8441), so it cannot do what was asked
// (a server's error, 502, would blame the server); CONNECT is 501 as
// ever.
//
// An h2c pool's HTTP health checks (health.type http) speak HTTP/2 with
// prior knowledge too (a gRPC server answers nothing else): the preface,
// SETTINGS and the GET as a stream with :authority host and user-agent
// spindle-health; the final response head's status decides as for
// HTTP/1.1, and the check then ends its connection with GOAWAY(NO_ERROR),
// as the pool's own connections end (before close_notify on an h2 pool).
// type tcp is a connect as ever.
//
// A reload that changes a pool's protocol makes it a new pool (its
// servers keep their state): the connections of the other protocol are
// not reused, an h2c pool's servers' idle HTTP/1.1 connections closing
// and an http1 pool's HTTP/2 ones finishing their streams and closing. A
// server a reload removes gets no new stream; its connections finish
// their streams and close. A drain lets the streams in flight finish,
// and the requests waiting for room on a connection start there as it
// frees; a connection closes once it carries no stream (one dialed for
// a request during the drain too). /metrics has per
// server: spindle_proxy_server_h2_connections (open: from the server's
// SETTINGS, which count the connect, to the close; a connection still
// connecting or waiting for them is not in it, nor one that failed),
// _h2_streams_total, _h2_goaways_total (GOAWAYs received),
// _h2_refused_streams_total and _h2_retried_streams_total,
// _h2_pings_total, _h2_ping_timeouts_total (connections closed for a
// PING's ACK not in time), _h2_ping_rtt_seconds (the last PING's round
// trip, the longest of the loops') and _h2_reset_retires_total
// (connections retired for the early resets sent on them, above);
// spindle_proxy_server_active counts an h2c pool's streams in flight,
// and _http_requests_total{conn} streams on a connection that had carried
// one before (reused) or not (new). The access log has a line per stream
// as ever (reused as above).
//
// A pool's servers may have a connection cap, max_conns, as HAProxy's
// server maxconn with its queue and Envoy's circuit breakers
// (max_connections, max_pending_requests) have:
//
//	pools:
//	  - name: app
//	    servers: ["10.0.0.1:80", {address: "10.0.0.2:80", weight: 2, max_conns: 800}]
//	    max_conns: 500     # per server, over all loops (a server's own replaces it); default 0: none
//	    max_queue: 1024    # waiters over all loops; -1: no bound
//	    queue_timeout: 5s  # a wait's bound (HAProxy's timeout queue)
//
// The cap counts the connections the proxy has to a server over every
// loop: connecting, in use and idle kept-alive ones alike (an atomic
// count per server, taken with a compare-and-swap before each dial; no
// lock). A server at its cap is skipped for the next of the pool with
// room, as a server down is; only when every server up is at its cap
// does the client (mode tcp), the request (mode http) or the HTTP/2
// client's stream (an h2c listener's, to an http1 pool) wait, in the
// pool's queue. Each loop has its own FIFO of waiters: a slot let go of
// (a connection closed) goes to the loop whose first waiter has waited
// longest (posted to it; the loop that let it go where they tie), so
// that no slot stays free while some loop has waiters, and a loop whose
// clients hold the slots does not keep them for its own waiters while an
// older one waits on another loop (a loop whose waiters are all served,
// or went, with a slot still free passes it on to another loop with
// waiters). A client or request
// that arrives while the pool has waiters goes behind them (for a server
// with a cap; as HAProxy, which serves its queue first), even where a
// slot is free: it is not taken from under a waiter being woken. Within
// a loop the waiters get their slots in the order they came; across
// loops, a client arriving while a freed slot is on its way to another
// loop's waiter may take it at its own loop's turn (the waiter stays
// first in its loop, and has the next one). A server its health checks
// bring up again has its slots go to the waiters at once, and so does a
// server whose passive health ejection runs out: an ejection's end is no
// event (ejected is read where a walk looks), so a loop whose waiter
// waits while a server of its pool is ejected sets a timer for the
// earliest such end, which wakes its queue (one timer per loop and pool,
// set again only for an earlier end; nothing where no server is
// ejected). A
// kept-alive connection idle in a loop's pool holds its slot: while the
// pool has waiters, a connection whose exchange ends (a request's, or
// an HTTP/2 client's stream's) goes to its loop's waiters where the
// pool's oldest waiter is among them (pooled, the first of them taking
// it: under a steady queue the connections go from request to request
// on their loop), else it closes, its slot going to the loop whose
// first waiter has waited longest: an upstream connection belongs to
// its loop, so that a slot moves to another loop only by a close and a
// new connect, and under a steady keep-alive load a loop's connections
// would otherwise stay with its own waiters while an older one on
// another loop waits out queue_timeout (HAProxy serves a server's queue
// oldest first); and a wait that begins has
// the idle connections to servers at their caps closed on the other
// loops (its own loop's are its waiters'). A waiter whose turn came
// looks for a connection again (an idle one to any server up first) and
// dials; while it waits it holds no slot (an HTTP/2 client's streams
// waiting hold none, so that 200 streams through 2 slots all complete),
// and a request's body waits in its window, as while its upstream
// connects.
//
// queue_timeout bounds the wait alone: it is not in response_timeout,
// which starts as the request is sent once a slot came, nor in
// connect_timeout, as HAProxy's timeout queue is apart from its timeout
// connect and timeout server (a request may wait queue_timeout, then
// connect_timeout, then response_timeout; an h2c pool, which has no
// max_conns, counts its wait for a stream in response_timeout instead:
// below). A wait ends with a slot; at queue_timeout (default 5s), with 503 (SQ
// in the access log) in mode http and the client closed in mode tcp,
// counted; when its client goes: an HTTP/1.1 client's FIN or close
// (nothing reached a server yet: as HAProxy's option abortonclose; one
// that sent more than its head, a body's start or a next request, is not
// read while it waits, and is seen going at its turn or its timeout), an
// HTTP/2 client's RST_STREAM or close, a mode tcp client's reset or its
// FIN with nothing sent (CD: as HAProxy's queue drops a client closed
// with nothing to pass on; one that sent bytes first, read and held
// while it waits, keeps its place, its FIN passed on after them once
// connected, as HAProxy's without option abortonclose); or at the
// proxy's stop (its clients are reset, KD, one whose turn came as its
// loop stopped too: the stopping loop dials nothing). A waiter whose
// turn came but whose connect then fails, every other server being full,
// waits again from the queue's end with the rest of its queue_timeout, and the
// server that failed is not tried again for it (each server is tried
// once per client or request, however many waits apart: a dead server's
// failures, each freeing its slot, would wake it to dial again at the
// rate the server refuses); while it waits again in its place, a slot of
// that server goes to a waiter behind it. A retry (retry below) that
// waits does so with what the request's waits before left of its
// queue_timeout, the time its tries took at the servers not counted.
// max_queue
// (default 1024, Envoy's max_pending_requests; -1: no bound) bounds the
// waiters over all loops: past it a request gets 503 at once (UO), a tcp
// client is closed, counted. max_queue and queue_timeout are only given with a max_conns.
// A reload's max_conns applies at once to the servers it keeps, whichever
// config their connections were made under: a raised cap wakes the
// waiters, a lowered one makes new connections wait until enough close
// (none is closed for it); a server a reload adds to a pool of the name
// that had it before, removed with connections to it still open, counts
// them against its cap (their closes wake the pool's waiters); max_queue
// and queue_timeout apply to the requests and clients that begin after
// it (one waiting when a reload replaced its pool may take the new
// queue_timeout at its next wait; one begun under a pool without
// max_conns that finds a server at the cap a reload gave it waits by
// the new ones). A
// request or client waiting when a reload replaces its pool walks the
// pool's new generation at its turn: the servers the reload added
// included, those it removed left out, those it failed to connect to
// still out (but where the pool became an h2c one: it walks the pool it
// waited for); where the new generation hashes (balance hash), from its
// key's entry: its key hash is kept where the pool hashed by the same key
// and seed before, else it is hashed by its client's address (the key
// client's, a request's without its field: the fields are not held while
// it waits; behind trusted_proxies the address is the proxy's), not by a
// hash of another seed or none. An h2c pool (protocol h2c)
// takes no max_conns: h2_max_connections bounds its connections, per
// server and loop, and its streams wait for room on them within
// response_timeout (a loop's own, with nothing shared between loops to
// hand over: a stream that ends makes room for that loop's waiters only). /metrics has per server spindle_proxy_server_max_conns
// (0: none) and spindle_proxy_server_connections (what it bounds), and per
// pool spindle_proxy_pool_queue_length (waiting now), _queued_total,
// _queue_timeouts_total, _queue_refused_total (max_queue),
// _queue_served_total and _queue_wait_seconds_total (the time the served
// waits spent queued: the mean wait is their ratio); the access log's
// queue_us is a request's or tcp connection's wait (HAProxy's Tw).
//
// A mode http listener and a route may have a retry policy, retry, as
// Envoy's retry_policy and HAProxy's retry-on and redispatch have: a try
// that failed before any of its response went to the client is given up
// and the request sent again, to another server of the pool, the client
// seeing the last try's outcome alone:
//
//	listeners:
//	  - name: gw
//	    listen: ":8081"
//	    mode: http
//	    pool: app
//	    retry: {on: [reset, 502-504, response-timeout], attempts: 1, per_try_timeout: 2s, buffer: 65536, budget: 20}
//	    routes: [{path_prefix: /search/, pool: search, retry: {on: [reset, "503"], attempts: 2}}]
//
// A route's policy replaces the listener's (a route without one takes
// the listener's). on lists the failures retried: reset, the server's
// connection closed or reset before a complete response head (SD); response-timeout, no response head within
// the try's timeout (per_try_timeout where shorter than response_timeout,
// else response_timeout: ST); and response statuses, each a status or a
// range from 500 to 599 ("503", "502-504"; "5xx" for all); refused-stream,
// to an h2c pool, a stream its server did not process (below), the response
// thrown away: its connection goes back to the idle pool where the whole
// response came with its head (no body, or a Content-Length body in the
// same read: a 503 mostly) and both sides keep it, and is closed
// otherwise, not drained (a body of any size costs nothing to skip; an
// HTTP/2 client's stream closes it always). connect-failure is accepted and changes nothing: a connect
// refused or timed out goes to the next server of the pool whatever the
// policy, each server once (the failover above, bounded by the pool, not
// by attempts or the budget, since nothing was sent). attempts (1 to 5,
// default 1) is the retries after the first try. A retry goes to the
// first server up after the one that failed that this request has not
// tried (Envoy's previous_hosts, HAProxy's redispatch), the balancer not
// asked (a retry that took a turn would send the next request to the
// server that failed); where every server up has been tried, to them
// again, the one after the last first; with none up the failure goes to
// the client. A hash pool's retry leaves the key's server too: it walks
// the key's entries on, the servers tried left out (to the key's next
// server, as where its server is down; its idle connections too), and
// from the key's entry again once every server up was tried; the key's
// next requests go to its server as before. per_try_timeout (default 0: response_timeout) counts as
// response_timeout does, from the head's sending and again as the body
// goes (as the proxy reads it from the client, not as a server's window
// lets it go on: TestH2UpPerTryTimeoutNotMovedByWindow; to an h2c pool
// from the stream's start at its server: a wait for room before it
// counts in response_timeout only, which runs from the try's start); a
// try past it is reset and, with response-timeout, retried, else
// answered 504 at once. response_timeout keeps its meaning for each try
// (the wait for the head where it is the shorter, and between a
// response's reads): a request's whole wait is bounded by attempts+1
// tries, not by response_timeout alone, as Envoy's per_try_timeout is
// below its route timeout.
//
// Only a request safe to send again is retried: its method one RFC 9110
// 9.2.2 makes idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE; a POST
// or PATCH is not, whatever the failure), and its body kept whole until
// the response head decides. buffer (default 65536, at most 16 MiB; 0:
// a request with a body is not retried) bounds the body kept: a
// Content-Length over it is not retried, and a chunked body is kept by
// its bytes as received (framing included) until it passes it, then let
// go of, the request no longer retried (nor is one from an HTTP/1.1
// client once its trailer section went: it goes rewritten, not as kept).
// From an HTTP/1.1 client the
// received buffers themselves are kept, not copies (their bytes go to
// the server by a copy while kept, and without one again once a response
// head decided or the body passed buffer), and given back at the
// response head, or at the exchange's end; 16 buffers a request and 128
// a loop, over all its pools, at most (a quarter of the loop's 512-buffer
// receive ring, which is every connection's, and a body trickled in
// small reads would hold a buffer for each few bytes: past either the
// request is not retried); an HTTP/2 client's DATA comes
// as slices of its connection's buffer, so its stream keeps a copy
// (within buffer, its capacity kept for the connection's next streams),
// as does an HTTP/1.1 client's request to an h2c pool (below). The
// copies of a loop's requests, over all its pools, hold 2 MiB at most
// together (what 128 of the engine's 16 KiB receive buffers hold, as the
// bound on the buffers): a request whose copy would pass it lets go of it, and is
// not retried once sent.
// spindle_proxy_pool_retry_buffered_bytes is what is held now. Nothing is
// retried once any byte of a response went to the client: an interim 1xx
// passed on ends the request's retries, as do a response head passed on
// and an upgrade asked for.
//
// budget bounds the retries in flight, as Envoy's retry_budget: per pool
// and loop (counters of the loop's own, no lock), the requests being
// retried at most budget percent (0 to 100, default 20) of the pool's
// requests in flight from the loop (its upstream connections in use or
// connecting, the one retrying counted), but 3 at least whatever the
// percent, so that a quiet pool retries too. Over it the try's failure
// goes to the client as it came (the 503 passed on, 502 for a reset,
// 504 for a timeout). Passive health (http_errors) counts each failed
// try with its server, as without retries. /metrics has
// spindle_proxy_pool_retries_total{pool,reason="reset"|"status"|
// "response_timeout"|"refused_stream"} and
// spindle_proxy_pool_retry_budget_exceeded_total{pool}, following the pool's name over reloads; the access log's
// retries field counts a request's retries, its server being the last
// tried. -check and /debug/config show retry with its defaults; a reload
// applies it to the requests after it (a request keeps the policy it
// began with). retry is refused in mode tcp.
//
// To an h2c pool a request is retried by the same rules, from an
// HTTP/1.1 client (its request as HEADERS and DATA) as from an HTTP/2
// client's stream: the methods, attempts, per_try_timeout, buffer,
// budget, another server first, nothing once a response byte or a 1xx
// went to the client. reset is the connection's end under the stream
// (SD), or the server's RST_STREAM before the response head but for
// CANCEL and NO_ERROR (the server ended the stream on purpose, as passive
// health has it: a gRPC server's at a deadline); a response in error
// (PH) is not retried, as a malformed HTTP/1.1 head is not. A status
// retried resets its stream (RST_STREAM CANCEL, the rest of the response
// not read), the connection going on with its other streams. The body
// kept is a copy, sent again from its start: an HTTP/2 client's DATA as
// it comes, an HTTP/1.1 client's data as it is sent (a chunked body's
// framing left out); trailers are kept too. A stream the server did not
// process (RST_STREAM REFUSED_STREAM, or above the last stream id of its
// GOAWAY) may be sent again whatever its method (RFC 9113 8.7): while no
// byte of its body went it is, with no policy, as above (counted in
// _h2_retried_streams_total, not in attempts or the budget; a retried
// request's not to the servers its retries tried); once some
// went, a policy retries it, with the body kept, where on lists
// refused-stream, whatever the method (a POST too; the body of any
// method to an h2c pool is kept for that, within buffer), or lists reset
// and the method may be sent again, counted as reason "refused_stream".
// refused-stream has to be listed, as in Envoy's retry_on: a refusal
// after the body went is the server's overload (its
// MAX_CONCURRENT_STREAMS passed, a GOAWAY), whose retries an operator
// chooses and the budget bounds; without it such a stream's 502 goes to
// the client, as without a policy. To an HTTP/1.1 pool it changes
// nothing.
//
// A listener and a route may have a rate limit, rate_limit, as nginx's
// limit_req (with nodelay), Envoy's local rate limit and HAProxy's sc
// rate have:
//
//	listeners:
//	  - name: gw
//	    listen: ":8081"
//	    mode: http
//	    pool: app
//	    rate_limit: {rate: 100, per: 1s, burst: 20, key: client}  # every request of the listener
//	    routes: [{path_prefix: /login, pool: app, rate_limit: {rate: 10, per: 1m, key: all}}]
//
// In mode http it counts requests (a listener's every request, a route's
// those it takes; a request passes where both allow it, and spends of
// neither budget where one refuses it, as nginx's limit_req charges none
// of its zones unless all pass: a client refused by a route keeps the
// listener's budget for the others), in mode tcp a listener's new
// connections. rate per per (default 1s) is the steady rate, one each
// per/rate (the emission interval, rounded up to whole nanoseconds: a
// rate it would move by more than 1% is refused); burst (default rate) is how many may
// come at once: a budget unspent for burst intervals takes burst at once,
// then one each interval. key client (the default) gives each client
// address its own budget, key all one for the listener or route over
// every client and loop. The
// client is the connection's address, but for a connection from a proxy
// in trusted_proxies (mode http): then it is the last address of the
// request's X-Forwarded-For values (its fields in order, each a list)
// that trusted_proxies does not list, as nginx's real_ip_recursive
// finds it (the first where all are listed; the proxy's own where there
// is none; an element that is not a bare address, such as "unknown" or
// one with a port, ends the walk at the address after it), so that the
// clients behind a load balancer each have their budget. An IPv4-mapped
// address counts as its IPv4 one, an IPv6 address by its /64 (a host
// commonly has a /64 to itself, and could take a new address of it for
// each request).
//
// Over the limit an HTTP/1.1 request gets 429 with Retry-After (the
// seconds until it would pass every limit in play, the listener's and
// the route's, rounded up) and a short body, RL
// in the access log, and reaches no server; its connection is kept
// where the client did not ask to close, its queue is below
// write_high_water (one pipelining requests faster than it reads their
// 429s is closed) and the request has no body, or one of up to 64 KiB:
// a Content-Length up to it, or chunked, not awaited with Expect:
// 100-continue (whether such a client sends it is not known). That body
// is read and thrown away as it comes, as nginx's limit_req does
// (ngx_http_discard_request_body), and the requests after it are read
// as before; a chunked one that goes past 64 KiB, or is malformed,
// closes the connection after the 429 has gone (counted:
// spindle_proxy_listener_discard_closed_total), as does one whose body
// has not all come request_timeout after the 429 (counted there too: the
// body's bound, as nginx's lingering_time bounds a discarded body;
// keepalive_timeout counts from the body's end, when the connection is
// idle for the next request); these closes, and a drain's or a reload's closing the
// connection mid-body, linger (reading and dropping what still comes, as
// after any refusal), so the kernel does not answer the body with a
// reset that would lose the 429. Else the 429 says Connection: close. An HTTP/2
// client's stream gets the 429 (with retry-after), and, where its body
// is still coming, RST_STREAM NO_ERROR, its connection going on. A mode tcp connection over the limit is closed at once, counted
// (not logged, as one max_conns turns away); max_conns decides first, so
// a connection it turns away spends nothing of the limit and is not
// counted by it. Nothing is delayed (nginx's
// delay): a request passes or is refused at once.
//
// The algorithm is GCRA (the generic cell rate algorithm: a token bucket
// kept as one time): a budget is an 8-byte cell holding its theoretical
// arrival time; a request at now passes where max(cell, now) plus the
// interval is at most burst intervals ahead of now, and then that time is
// stored with a compare-and-swap from the value it was decided on, taken
// again where another loop changed it meanwhile: no lock, goroutine or
// allocation, the time the proxy's monotonic clock, and exact over the
// loops (a burst of 10 lets 10 through in all, not 10 per loop). Key
// client hashes the address (maphash, a seed per table) to two cells of
// a fixed table of table_size cells (default 65536: 512 KiB per rate
// limit; a power of two from 2 to 2^24); a request is decided by the
// lower of the two and spends both (a count-min sketch with conservative
// update). A cell is never behind any client hashed to it, so clients
// that share cells are refused more, never allowed more than their own
// budgets, and a client is held back by others only where both its cells
// are shared with clients spending at the same time: with n clients
// active at once (spending within burst intervals of each other) about
// (2n/65536)^2 in the default table, 0.1% at n = 1000 (one cell a client
// would be n/65536, 1.5%). Memory is bounded whatever the clients'
// number; cells are never cleared (one whose time has passed is a budget
// unspent). The decision raises the other cell before its swap, so a
// swap that fails may leave it raised: stricter for the clients hashed
// there, never looser.
//
// A request under two limits is decided by both before either is spent,
// then spent of each in turn; where another loop spent the route's budget
// between the decision and the spending, the request is refused and the
// listener's spending given back (key all): its cell moves back by what of
// its interval is still ahead of now (less what other give-backs took back
// since its spending, which may have moved it earlier), with a
// compare-and-swap loop, which is exact where no other decision came after
// it and never lowers the budget past what the decisions after it on other
// loops spent. Key client's cells are not given back (a cell may hold
// another client's spending as its bound, which lowering it would
// undercut): in that race the listener's budget is spent, stricter, never
// looser. Nor is a cell a decision under a reload's shorter burst brought
// back to it meanwhile (the budget without the spending would be there
// too).
//
// A reload keeps a rate limit's budgets and counters where the listener
// (by name and mode) or the route (by the listener's and its name) had
// one with the same key and table_size, whatever else changed: a reload
// does not reset a client's budget. A changed rate, per or burst applies
// to the decisions after it, against the budgets as spent, in requests:
// where the interval (per/rate) changes, each budget's lead is rescaled
// to as many of the new intervals as it had spent of the old (10 spent of
// a burst of 10 at one a second leave none at one a minute, not the
// fraction of a minute 10 seconds are; the budgets are copied, and the
// decisions on the loops between the copy and their taking the new limit
// are not carried over); a budget spent further ahead than the new burst
// counts as spent to it (a shorter limit holds no client back for the old
// one's time); a changed key or table_size starts new budgets and
// counters. /metrics has
// spindle_proxy_rate_limit_decisions_total{listener,route,result=
// "allowed"|"limited"} (route="" for the listener's own limit), saying
// what happened to each request: one that passes is allowed by each limit
// in play, one refused is limited by the limit that refused it alone (a
// request the route's limit refuses is not counted by the listener's,
// which it passed: it was not allowed, nor refused by it), so the limited
// counts add up to the rate limits' 429s (closed connections in mode
// tcp); the 429s count as responses the proxy made too. -check and /debug/config show
// rate_limit with its defaults.
//
// The forwarding fields depend on the client's address (an IPv4-mapped
// one compared as IPv4) and the listener's trusted_proxies (CIDRs,
// default none), as nginx's set_real_ip_from and Envoy's
// xff_num_trusted_hops make possible. From a client not in it, the
// X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Host, X-Real-IP and
// Forwarded fields it sent are dropped, whatever their number, with the
// rest of the X-Forwarded-* family and Front-End-Https (servers take a
// client's scheme from X-Forwarded-Ssl: on, Spring's
// ForwardedHeaderFilter and Rack among them, its port and path prefix
// from X-Forwarded-Port and -Prefix), and the
// proxy writes X-Forwarded-For: the client's address, X-Forwarded-Proto:
// http (https on a listener with tls) and X-Forwarded-Host: the request's host (its Host field, else an
// absolute target's authority; none when it has neither): at the edge, a
// client cannot forge its address, scheme or host to the servers. From a
// client in it (a proxy in front), the client is appended to the
// X-Forwarded-For values it sent (all of its lines, in order, as one
// field), and its other forwarding fields pass as they came (X-Forwarded-Proto and X-Forwarded-Host
// written as above where it sent none). The proxy does not write an RFC
// 7239 Forwarded field. This changed a default: before trusted_proxies,
// every client's X-Forwarded-For was appended to and its Forwarded,
// X-Forwarded-Host and X-Real-IP passed on; a proxy behind another one
// now needs that one's addresses in trusted_proxies to keep them.
//
// A request field whose name has an underscore ("X_User") is one field
// to the proxy and the same as another to a server that names fields
// as CGI does (upper case, '-' made '_': PHP, WSGI, Rack), which reads
// X_User and X-User both as HTTP_X_USER, either winning by its own
// choice; lighttpd's CGI, FastCGI and SCGI so read any byte of a name
// not a letter or digit, and PHP a '.' ("X.Real.IP" is its
// HTTP_X_REAL_IP). So a forwarding field spelled with underscores or
// another separator (its name with any byte not a letter or digit read
// as '-' is one of the five above: X_Forwarded_For, x_forwarded-proto,
// X.Real.IP, ...) is dropped from every client, trusted or not (a proxy
// in front passes its own under their names, which are what the proxy
// reads and passes on), and request_headers and response_headers read
// '_' and the other separators as '-' in names (a remove or set of
// X-User drops X_User and X.User too; a rule naming Content_Length or
// X_Forwarded_For is refused as the name it stands for). The other
// fields a mode http listener's headers_with_underscores decides, as
// Envoy's headers_with_underscores_action: allow (the default) passes
// them, drop removes them, reject answers the request 400 (PR in the
// access log; an HTTP/2 client's stream, the connection going on); it
// looks for '_' alone, as Envoy's does (a name with a '.' is no CGI
// name to most servers: to lighttpd's, a request_headers rule for the
// field covers it).
// spindle_proxy_listener_underscore_dropped_total counts the fields
// dropped, the forwarding ones above with drop's. allow is the default,
// as in Envoy and HAProxy and as before the option, since the fields
// the proxy answers for are safe either way while nginx's drop by
// default (underscores_in_headers off) silently loses fields that
// clients send on purpose; a listener whose servers read fields the
// CGI way and believe one that no client should set (an identity a
// gateway in front writes, without a request_headers rule for it) says
// drop. drop applies to the request's trailer section too, and so does
// reject, as drop (counted alike): its 400 is too late once the head has
// gone to the server, and a reset would lose a request drop passes. -check
// and /debug/config show it; a reload applies it to the requests after
// it.
//
// A request's trailer section (an HTTP/1.1 chunked body's, an HTTP/2
// stream's trailing HEADERS) goes on, to either pool protocol, without
// the forwarding fields in any spelling (X-Forwarded-For, X_Real_IP,
// X.Forwarded.For, ..., from a trusted client too: the proxy reads a
// head's alone) and the fields RFC 9110 6.5.1 keeps out of trailers:
// the framing and routing (Content-Length, Transfer-Encoding, Host; an
// HTTP/1.1 chunked body with them is refused 400 by internal/h1), the
// connection's (Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
// Upgrade, HTTP2-Settings, and those an HTTP/1.1 head's Connection
// names, RFC 9110 7.6.1), Via, authentication (Authorization,
// Proxy-Authorization, Cookie), the request's modifiers (Cache-Control,
// Pragma, Expect, Max-Forwards, Range, If-Match, If-None-Match,
// If-Modified-Since, If-Unmodified-Since, If-Range) and its content's
// format (Content-Type, Content-Encoding, Content-Range), names compared
// as request_headers compares them, and the fields the listener's and
// the route's request_headers remove or set and headers_with_underscores
// drop or reject (above; the forwarding fields spelled with another
// separator than '-' are counted as a head's). A server that merges
// trailers into the header section (Apache httpd with MergeTrailers on,
// as before 2.4.11) would read a client's X-Forwarded-For there beside or over
// the proxy's, or an Authorization a gateway in front never checked;
// nginx passes no request trailers on, nor Envoy over HTTP/1 without
// enable_trailers, and Go's net/http keeps them apart (Request.Trailer).
// The other fields pass as they came (a gRPC
// client's among them). An HTTP/1.1 client's chunked body goes without
// a copy up to its trailer section, which is held to the body's end
// (16 KiB and 100 fields at most, internal/h1's bounds: a request past
// them gets 400) and sent filtered; a body without one is not touched.
//
// A response's trailer section (an HTTP/1.1 server's chunked body's, an
// h2c server's trailing HEADERS), to either client protocol, goes on
// without the fields the listener's and the route's response_headers
// remove or set (set and add write in the head alone) and those RFC
// 9110 6.5.1 keeps out of trailers, names compared as response_headers
// compares them: the framing and hop-by-hop fields no rule may name
// (Content-Length, Transfer-Encoding, Host, Connection, Keep-Alive,
// Proxy-Connection, TE, Trailer, Upgrade, HTTP2-Settings, Via: one list
// for rules and both trailer sections; and those an HTTP/1.1 server's
// Connection names), the authentication challenges
// (WWW-Authenticate, Proxy-Authenticate; Authentication-Info and
// Proxy-Authentication-Info pass, RFC 9110 11.6.3 allowing them in
// trailers), Set-Cookie (state taken before the content, as a request's
// Cookie), the response controls (Age, Cache-Control, Expires, Pragma,
// Vary, Location, Retry-After) and the content's format (Content-Type,
// Content-Encoding, Content-Language, Content-Location, Content-Range).
// A client or gateway that merges trailers into the head would read
// there a field a rule took out of it, or a cookie or a cache control
// the head did not have; gRPC's grpc-status and grpc-message, checksums
// and the other fields pass as the server sent them, and so do the
// forwarding fields (as in a head). An HTTP/1.1 server's chunked body
// goes to an HTTP/1.1 client without a copy up to its trailer section,
// which is held to the body's end (16 KiB and 100 fields at most; past
// them the client is reset, as for a malformed body) and sent filtered; a
// body without one is not touched. An h2c server's trailer field whose
// value holds a control character HTTP/1.1 does not carry (HTTP/2 refuses
// only NUL, CR and LF) is left out for an HTTP/1.1 client, the other
// fields passing; so is such a field of its response head (1xx or
// final), the response going on without it rather than as a 502, as
// nghttp2 leaves out an invalid regular field by default (nginx's HTTP/2
// parser refuses only NUL, CR and LF and would pass it).
//
// The admin server serves /metrics (Prometheus text format, names
// spindle_proxy_*), /healthz and /debug/config (the effective config as
// JSON). It closes a client that takes more than 5s to send a request
// (head and body), is idle 5s after an answer, or takes more than 10s
// to read one: a client, slow or gone, holds none of its connections for
// good; a request head of more than 16 KiB (as the listeners bound
// theirs) gets 431. In mode http each route is counted too, by its name (default:
// host and path prefix, "api.example.com/v1/"; "default" is the
// listener's pool): spindle_proxy_http_route_requests_total and
// spindle_proxy_http_route_responses_total{class,source}.
//
// A listener may keep an access log:
//
//	listeners:
//	  - {name: gw, listen: ":8081", mode: http, pool: app, access_log: {path: /var/log/spindle/gw.log, format: json}}
//
// (path "-" is standard error; format json, the default, or text). Mode
// http logs a line per exchange, mode tcp a line per client connection
// (a client max_conns turns away is only counted; one whose TLS
// handshake failed, or that ALPN gave h2 and that sent no HTTP/2
// preface, is counted and in the proxy's log, not here: neither made an
// exchange nor reached a server); text has the same
// fields in this order, separated by spaces, strings quoted and escaped
// as in JSON and "-" for none (null in JSON):
//
//	http: time listener client method host target proto status req_bytes resp_bytes route server source duration_us reused term queue_us retries
//	tcp:  time listener client server client_bytes server_bytes duration_us term queue_us
//
// time is the line's (UTC, µs); client the client's address and port
// (server's likewise; one whose IPv6 zone needs escaping is a quoted
// string in text too);
// host the Host field or an absolute target's authority, and target the
// path and query (bounded: 256 and 1024 bytes); status 0 where no
// response was sent; the byte counts are of the bodies' data passed on
// (without chunked framing; a 101's count the bytes through its tunnel
// too); server is the last server the request went to; source is
// upstream or proxy (a response the proxy made); duration_us runs from
// the request head's arrival to the response's end (mode tcp: the
// connection's life; a 101's line is written at its tunnel's end, as
// HAProxy and nginx log an upgraded connection); reused (true, false;
// text reused, new) tells a pooled upstream connection; queue_us is the
// time waited in the pool's queue for a slot (max_conns; 0 for none); retries the times the request
// was sent again by its retry policy (0 for none: the field is the
// line's last, so that a text parser of the fields before reads on). term says how it ended, after HAProxy's
// termination states and Envoy's response flags: "-" normally, else
//
//	CD  the client closed or reset its connection first (HAProxy CD, Envoy DC)
//	CT  the client timed out: its request head did not arrive in request_timeout (408), or it took nothing of what was sent it for engine.write_timeout (close_timeout after the proxy closed it; an HTTP/2 stream: its window stayed shut) and was reset (HAProxy cR, cD)
//	SD  the server closed or reset its connection first: 502 or a reset (HAProxy SD/SH, Envoy UC)
//	ST  the server timed out: it did not answer in response_timeout (504 or a reset), or took nothing of what was sent it for engine.write_timeout (502 or a reset) (HAProxy sH/sD, Envoy UT)
//	SC  every server tried failed to connect: 502 (HAProxy SC, Envoy UF)
//	NS  no server of the pool was up: 503 (Envoy UH)
//	PR  the proxy refused the request: 400, 413, 501, ... (HAProxy PR, Envoy DPE)
//	PH  the proxy refused the server's response: 502 or a reset (HAProxy PH, Envoy UPE)
//	IT  mode tcp, or a 101's tunnel: idle_timeout closed the connection (Envoy SI)
//	SR  an h2c server reset the stream (RST_STREAM), its connection going on: a reset, or 502 to HTTP/1.1 (Envoy UR)
//	SQ  queue_timeout ran out in the pool's queue for a slot (max_conns): 503, or the tcp client closed (HAProxy sQ)
//	UO  the pool's queue held max_queue waiters: 503 at once, or the tcp client closed (Envoy UO)
//	RL  a rate_limit refused the request: 429 (Envoy RL)
//	KD  the drain ran out (or Proxy.Abort cut it) with the connection or exchange under way: both sides reset (HAProxy K)
//
// The loops never wait for the log: each formats its lines into its own
// buffers, which a writer goroutine writes out (every 100ms, or 64 KiB at
// a time); a loop the writer is 4 MiB behind drops its lines and counts
// them (spindle_proxy_access_log_dropped_total). Run writes out what is
// left before it returns, waiting 5s at most for a writer that cannot.
// Proxy.ReopenLogs opens the files again, after logrotate moved them. A
// reload keeps a listener's log where its path stays; a log a reload
// leaves to no listener (its path changed, its listener removed) is
// written out and its file closed once no connection that could write
// to it is left: the clients and HTTP/2 streams begun under it (a
// kept-alive client's next request goes to the new log).
//
// Proxy.Reload applies a new config while the proxy runs, cutting no
// transfer (as HAProxy, Envoy and nginx reload): connections open keep
// the listener, pool and server they were made with, and new ones follow
// the new config; in mode http the next request on an open client
// connection follows it too (its listener's routes, pool, timeouts,
// max_request_body and upgrades; a request in progress finishes under the
// settings it began with). Servers are matched by pool name and resolved
// address: a server kept keeps its health state, counters and idle
// keep-alive connections; one removed takes no new connection, its idle
// ones close and those in use finish; one added starts up, as at New,
// until its pool's checks or passive health say otherwise. Listeners are
// matched by name: one added opens, one removed closes (its connections
// finish), one whose address changed (not merely its spelling:
// "localhost:80" is "127.0.0.1:80") is opened on the new address before
// the old closes, and one whose mode changed keeps its socket as a new
// listener (its counters start again); the kept-alive HTTP clients of the
// listener replaced in these three cases are closed once idle (at once,
// or after the response in progress, with Connection: close). A listener
// with tls reads its certificate files again (see tls above). The engine section and
// admin.listen cannot change while the proxy runs: a config that changes
// them, fails validation, does not resolve or cannot open a listener is
// refused whole, naming the field, and nothing changes. The loops take
// the new config each from its own copy, posted to it (engine.Loop.Post):
// the data path takes no lock for it. /metrics counts reloads
// (spindle_proxy_config_reloads_total{result="ok"|"error"}) and has the
// time of the last applied
// (spindle_proxy_config_last_reload_success_timestamp_seconds, the start's
// until then); /debug/config shows the config in force.
//
// `spindle proxy -config FILE` runs a proxy until SIGINT or SIGTERM and then
// drains (a second signal, Proxy.Abort, cuts what is left at once; a
// connection still open at the drain's end is reset, a tunnel's both
// ways, so that neither peer reads a stream cut short as a whole one
// (a side whose peer had ended its stream, the FIN passed on, reads it
// whole and then EOF);
// SIGUSR1 reopens the access logs); SIGHUP reads FILE again and reloads
// it (one line on stderr: the listeners in force, or the error, the
// config in force staying);
// `spindle proxy -check -config FILE` validates a config and prints
// it with its defaults.
package proxy

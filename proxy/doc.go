// Package proxy is spindle's sidecar and gateway proxy. This first slice is
// an L4 TCP proxy on the engine (HTTP/1.1 reverse proxying comes later):
// listeners accept on every loop and forward each client to a server of an
// upstream pool, dialed from the loop that accepted the client, handing
// received buffers to the other side without copying them.
//
// A YAML file configures it (LoadConfig, strict: an unknown field is an
// error):
//
//	engine: {backend: uring, cpus: [0, 1]}
//	listeners:
//	  - {name: web, listen: ":8080", pool: app, connect_timeout: 2s, idle_timeout: 5m, max_conns: 10000}
//	pools:
//	  - name: app
//	    servers: ["10.0.0.1:80", "app2.internal:80"]
//	    balance: least-conn
//	    health: {interval: 2s, timeout: 1s, rise: 2, fall: 3}
//	    passive: {fails: 3, cooldown: 10s}
//	admin: {listen: "127.0.0.1:9901"}
//
// A server may be named by host: New resolves each name once, to the first
// address it resolves to (whichever family that is), and fails naming the
// server when it does not resolve; the data path never resolves, so a
// name's later changes are not seen until the proxy is made again.
//
// The data path keeps its state per loop and takes no lock: each loop has
// its own round-robin cursor and connection counts per server (least-conn
// picks among the loop's own), and its own counters, which the admin
// server sums. Reading a side stops while its peer's queue holds
// engine.WriteHighWater of buffer memory and resumes when the peer drains; a side's
// FIN is passed on to the other (half-close), and a reset or error on one
// side closes the other. A server that refuses or times out is skipped for
// the next one of the pool, each server tried at most once per client.
//
// Health checks, when a pool has them, are TCP connects made off the loops
// (a goroutine per pool); rise and fall consecutive results move a server
// up or down, and the loops read that state with an atomic load. A down
// server gets no new connections; a client for whom no server is up is
// closed and counted.
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
// The admin server serves /metrics (Prometheus text format, names
// spindle_proxy_*), /healthz and /debug/config (the effective config as
// JSON).
//
// `spindle proxy -config FILE` runs a proxy until SIGINT or SIGTERM and then
// drains (a second signal, Proxy.Abort, closes what is left at once);
// `spindle proxy -check -config FILE` validates a config and prints
// it with its defaults.
package proxy

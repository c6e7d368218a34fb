// Package engine is spindle's per-core runtime: one event loop per CPU, each
// on a goroutine locked to an OS thread pinned to that CPU, each owning its
// own kernel queue (an io_uring ring or an epoll instance), receive buffers,
// send slab, timers and connection table.
//
// A service implements Handler. Its callbacks run on the loop thread of the
// connection and must not block; blocking work goes to another goroutine and
// comes back with Loop.Post.
//
//	e, err := engine.New(nil, handler) // nil Config = defaults
//	ln, err := e.Listen("tcp", "127.0.0.1:8080", nil)
//	err = e.Run(ctx)                    // returns after Shutdown, ctx end, or every loop failing
//
// Listen opens one SO_REUSEPORT socket per loop and steers each connection
// to the socket of the loop running on the CPU that processed its SYN, so a
// connection is served on the core that runs its receive path: on 6.2 and
// later by setting each socket's SO_INCOMING_CPU, which the kernel's
// reuseport selection prefers and which holds when the group has other
// sockets (another process's, during an upgrade); before 6.2 by a
// classic-BPF reuseport program (SKF_AD_CPU) that picks the socket by its
// place in the group. A SYN processed on a CPU that runs none of the
// engine's loops goes, on 6.2 and later, to the socket the kernel's hash of
// the connection's addresses and ports picks, as without steering (any
// socket of the group, another process's too); before 6.2 the program
// sends it to the socket at place cpu mod n in the group, n the number of
// loops: loop cpu mod n's while the group holds this Listen's sockets
// alone (with loops on CPUs 2 and 3, a SYN on CPU 4 goes to the loop on
// CPU 2, one on CPU 5 to the loop on CPU 3), and a place past the group's
// last socket (some closed) to the kernel's hash as well. The program
// steers at most 2046 loops (two instructions each, in the kernel's 4096):
// before 6.2, a Listen with more fails unless ListenConfig.NoSteering.
//
// Backends (Config.Backend): "uring" (default), "uring-sqpoll", "uring-napi",
// "epoll" and "epoll-busypoll". They share this API and the test suite. When
// io_uring is unavailable the engine runs on epoll and says so once (each
// engine, at New) through Config.Logf. A loop whose SQPOLL ring or NAPI
// registration the kernel refuses when Run sets it up runs plain uring,
// and one whose ring the kernel refuses then (ENOMEM past RLIMIT_MEMLOCK,
// which counts the rings without CAP_IPC_LOCK: LockedMemory) runs epoll,
// each said once through Config.Logf; Engine.Backend and Engine.BatchWait
// report what the loops run and wait with once Run has started them (each
// loop's backend where they differ), and so does Run's start-up line.
//
// The Go scheduler: a loop sleeps in io_uring_enter or epoll_wait through
// Syscall6, so the scheduler sees it, and keeps out of the runtime's way in
// two ways. It yields (runtime.Gosched) every 8 ms, without which the
// runtime counts it as a goroutine running too long and takes its P away
// from every sleep; and Run keeps GOMAXPROCS one above the number of loops
// in the process (raising it, saying so through Config.Logf, and restoring
// it afterwards; Config.KeepGOMAXPROCS opts out), without which the runtime
// takes a sleeping loop's P after 20 µs. Both are measured in
// docs/BENCHMARKS.md, "The scheduler and the loops".
//
// Peers that do not read: a connection's write queue is bounded in memory
// by Config.WriteHighWater (reading pauses above it; a proxy, with
// Config.ReadPastHighWater, pauses the side that feeds it) and in time by
// Config.WriteTimeout (off by default, as Go's net without a deadline: a
// queue that has not moved for that long is reset) and Config.CloseTimeout
// (30 s by default: a Close still waiting on its queue is reset), so that a
// slow-read attack holds a connection and its buffers for a bounded time.
//
// Shutdown is graceful: the listeners close, a Handler that is also a
// Drainer gets OnDrain for each open connection (to send an HTTP/2 GOAWAY,
// close idle keep-alive connections, finish the rest), and Shutdown waits
// for the connections to close until its context is done.
//
// Goroutines: methods of Engine may be called from any goroutine. Methods of
// Conn, and of Loop unless said otherwise, may be called only on the loop
// goroutine that owns them (inside Handler callbacks, timer functions and
// functions passed to Loop.Post).
package engine

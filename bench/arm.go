package bench

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// ServerConfig configures a benchmark server.
type ServerConfig struct {
	// Addr is the listen address. Default "127.0.0.1:0".
	Addr string
	// Loops is the number of event loops (or, for go-net, GOMAXPROCS) the
	// server may use. Default 1.
	Loops int
	// CPUs are the CPUs the server is pinned to; the server child pins its
	// whole process. Nil leaves the process unpinned; the engine arms then
	// pin their loops to the first CPUs the process may run on.
	CPUs []int
	// SpareCPUs are CPUs outside the server's and the client's that the
	// arm may give to helper threads (the uring-sqpoll arm's SQPOLL
	// thread). Empty: the first CPU outside CPUs.
	SpareCPUs []int
	// Compute is CPU time burned per request before replying
	// (--compute-us).
	Compute time.Duration
	// BodySize is the HTTP response body size for requests without a body.
	// Default DefaultPayload.
	BodySize int
}

// WithDefaults returns c with the documented defaults filled in; every
// arm's Start applies it. Any goroutine.
func (c ServerConfig) WithDefaults() ServerConfig {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if c.Loops <= 0 {
		c.Loops = 1
	}
	if c.BodySize <= 0 {
		c.BodySize = DefaultPayload
	}
	return c
}

// Server is a running benchmark server.
type Server interface {
	// Addr is the address the server listens on.
	Addr() net.Addr
	// Close stops the server and closes its connections. It may be called
	// from any goroutine, once.
	Close() error
}

// Arm is one benchmark server implementation, selected by name.
type Arm struct {
	// Name selects the arm on the command line ("go-net", "gnet",
	// "epoll", …).
	Name string
	// Summary is a one-line description for reports.
	Summary string
	// Start starts the server in the calling process. It is nil for arms
	// that live in the peers binary (see Peer) of a process that does not
	// embed them.
	Start func(ctx context.Context, cfg ServerConfig) (Server, error)
	// Peer marks arms served by the binary built from the nested module
	// bench/peers instead of the spindle binary.
	Peer bool
	// Program, if set, builds the arm's own server program into outDir
	// and returns its command line (the c-liburing arm's C server). The
	// harness calls it once per run, starts that program instead of a
	// spindle server child, with the same flags, and the program must
	// answer the same control protocol (see ServeMain). An error skips
	// the arm with the error as the reason.
	Program func(ctx context.Context, outDir string) ([]string, error)
	// MaxLoops, when above 0, is the most server loops the arm can run
	// (the single-threaded c-liburing server: 1); the harness skips the
	// arm, with the reason, at loop counts above it.
	MaxLoops int
	// Unavailable, if set, says why the arm cannot run on this host (a
	// missing kernel feature, say); the harness then skips it and reports
	// the reason.
	Unavailable func() error
	// NeedsSpareCPU marks arms that run a busy helper thread (SQPOLL) and
	// need a CPU of their own outside the server and client CPUs; the
	// harness skips them, with the reason, when there is none.
	NeedsSpareCPU bool
	// Order sorts arms in reports and runs: baselines first.
	Order int
	// OptIn marks a variant of another arm (a setting under study) that
	// runs only when named in Config.Arms, not by default.
	OptIn bool
}

// servesLoops reports whether the arm can run loops event loops (MaxLoops).
func (a Arm) servesLoops(loops int) bool { return a.MaxLoops <= 0 || loops <= a.MaxLoops }

var (
	armsMu sync.Mutex
	arms   = map[string]Arm{}
)

// RegisterArm adds an arm. It is meant to be called from init functions
// (or a peer binary's main before ServeMain); registering a name twice
// replaces the earlier arm, so that a peer binary can supply Start for an
// arm the spindle binary lists as Peer.
func RegisterArm(a Arm) {
	armsMu.Lock()
	defer armsMu.Unlock()
	arms[a.Name] = a
}

// Arms returns the registered arms in report order.
func Arms() []Arm {
	armsMu.Lock()
	defer armsMu.Unlock()
	out := make([]Arm, 0, len(arms))
	for _, a := range arms {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Arm) int {
		if a.Order != b.Order {
			return a.Order - b.Order
		}
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return out
}

// LookupArm returns the arm registered under name.
func LookupArm(name string) (Arm, error) {
	armsMu.Lock()
	defer armsMu.Unlock()
	a, ok := arms[name]
	if !ok {
		names := make([]string, 0, len(arms))
		for n := range arms {
			names = append(names, n)
		}
		slices.Sort(names)
		return Arm{}, fmt.Errorf("bench: unknown arm %q (have %v)", name, names)
	}
	return a, nil
}

func init() {
	RegisterArm(Arm{
		Name:    "go-net",
		Summary: "Go's net package: a goroutine per connection on the runtime netpoller (epoll)",
		Start:   startGoNet,
		Order:   0,
	})
	RegisterArm(Arm{
		Name:    "gnet",
		Summary: "gnet v2: event loops on epoll, one per loop thread (peer binary from bench/peers)",
		Peer:    true,
		Order:   10,
	})
}

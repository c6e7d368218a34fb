package bench

import "fmt"

// Topology is where the server and the client run relative to each other.
type Topology interface {
	// Name is "loopback" or "wire".
	Name() string
	// ServerPrefix is prepended to the server child's command line (for
	// example "ip netns exec NS").
	ServerPrefix() []string
	// ListenAddr is the address servers listen on, with port 0.
	ListenAddr() string
	// ClientNetNS is the network namespace file the client dials from,
	// "" for the harness's own.
	ClientNetNS() string
	// Close removes whatever the topology created. It may be called once,
	// from any goroutine.
	Close() error
}

// Loopback is the loopback topology: server and client in the harness's
// network namespace, over 127.0.0.1. Loopback has no NAPI instances, so
// busy polling does nothing on it.
type Loopback struct{}

// Name implements Topology. Any goroutine.
func (Loopback) Name() string { return "loopback" }

// ServerPrefix implements Topology. Any goroutine.
func (Loopback) ServerPrefix() []string { return nil }

// ListenAddr implements Topology. Any goroutine.
func (Loopback) ListenAddr() string { return "127.0.0.1:0" }

// ClientNetNS implements Topology. Any goroutine.
func (Loopback) ClientNetNS() string { return "" }

// Close implements Topology. Any goroutine.
func (Loopback) Close() error { return nil }

// NewTopology creates the named topology: "loopback" or "wire". For "wire",
// tag makes the namespace and interface names unique (the harness passes
// its pid); the caller must Close it.
func NewTopology(name, tag string) (Topology, error) {
	if err := CheckTopology(name); err != nil {
		return nil, err
	}
	if name == "wire" {
		return NewWire(tag)
	}
	return Loopback{}, nil
}

// CheckTopology returns nil for a name NewTopology takes ("loopback",
// "wire", or "" for loopback), an error naming those for any other.
func CheckTopology(name string) error {
	switch name {
	case "", "loopback", "wire":
		return nil
	}
	return fmt.Errorf("bench: unknown topology %q (loopback or wire)", name)
}

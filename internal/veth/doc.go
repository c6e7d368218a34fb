// Package veth builds the "wire" test and benchmark topology: two network
// namespaces joined by a veth pair with GRO on and TSO off on both ends, so
// that the receive path goes through real NAPI instances and TCP sockets get
// NAPI ids. It also runs code on a thread inside such a namespace. It drives
// ip(8) and ethtool(8) and needs root; on systems other than Linux every
// function returns ErrNotSupported.
package veth

import (
	"errors"
	"fmt"
	"os"
	"strconv"
)

// ErrNotSupported is returned on systems other than Linux.
var ErrNotSupported = errors.New("veth: not supported on this system")

// ErrNotRoot is returned by Requirements and New when the process is not
// root: making network namespaces and a veth pair between them, and
// configuring them, takes CAP_SYS_ADMIN and CAP_NET_ADMIN.
var ErrNotRoot = errors.New("veth: needs root: making network namespaces and a veth pair takes CAP_SYS_ADMIN and CAP_NET_ADMIN")

// ToolError reports a tool that New needs but cannot find.
type ToolError struct {
	Tool    string // "ip" or "ethtool"
	Package string // the Debian package that provides it
	Err     error  // from exec.LookPath
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("veth: needs %s(8) (apt-get install %s): %v", e.Tool, e.Package, e.Err)
}

func (e *ToolError) Unwrap() error { return e.Err }

// Config says how to build a Pair. A nil *Config is not allowed: Tag is
// required.
type Config struct {
	// Tag makes the names recognisable ("bench", "uring"); the process id
	// is added to make them unique. Required.
	Tag string
	// AddrA and AddrB are the addresses of the two ends in CIDR notation.
	// Defaults: 10.213.0.1/30 and 10.213.0.2/30.
	AddrA, AddrB string
}

// Pair is a built (or planned) topology.
type Pair struct {
	// NSA and NSB are the namespace names (files under NetNSDir).
	NSA, NSB string
	// DevA and DevB are the veth ends, DevA in NSA and DevB in NSB.
	DevA, DevB string
	// AddrA and AddrB are the addresses with prefix length ("10.213.0.1/30").
	AddrA, AddrB string
}

// NetNSDir is where ip(8) keeps named network namespaces.
const NetNSDir = "/var/run/netns"

// Path returns the namespace file of the named namespace, for InNetNS.
func Path(ns string) string { return NetNSDir + "/" + ns }

// IPA returns the address of DevA without its prefix length. Any goroutine.
func (p *Pair) IPA() string { return stripPrefix(p.AddrA) }

// IPB returns the address of DevB without its prefix length. Any goroutine.
func (p *Pair) IPB() string { return stripPrefix(p.AddrB) }

func stripPrefix(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i]
		}
	}
	return s
}

// Names returns the Pair that New(cfg) builds in this process, without
// building anything.
func Names(cfg Config) Pair {
	pid := strconv.Itoa(os.Getpid())
	// Interface names are limited to 15 bytes: "sp" + tag + pid + side,
	// the tag shortened to fit.
	t := cfg.Tag
	if n := 15 - 2 - len(pid) - 1; len(t) > n {
		t = t[:max(n, 0)]
	}
	p := Pair{
		NSA: "spd-" + cfg.Tag + "-" + pid + "-a", NSB: "spd-" + cfg.Tag + "-" + pid + "-b",
		DevA: "sp" + t + pid + "a", DevB: "sp" + t + pid + "b",
		AddrA: cfg.AddrA, AddrB: cfg.AddrB,
	}
	if p.AddrA == "" {
		p.AddrA = "10.213.0.1/30"
	}
	if p.AddrB == "" {
		p.AddrB = "10.213.0.2/30"
	}
	return p
}

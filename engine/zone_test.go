package engine

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestZoneCacheRefresh checks the zone cache's answers against interface
// lists it is given: a hit answers from the last dump, a miss takes a new
// one (an interface added, renamed or gone since), and so does a lookup once
// the dump is older than zoneCacheAge (a name now on another index).
func TestZoneCacheRefresh(t *testing.T) {
	host := []net.Interface{{Index: 1, Name: "lo"}, {Index: 2, Name: "eth0"}}
	dumps := 0
	old := interfaces
	interfaces = func() ([]net.Interface, error) {
		dumps++
		return append([]net.Interface(nil), host...), nil
	}
	t.Cleanup(func() { interfaces = old })
	var z zoneCache
	check := func(what string, got, want any, wantDumps int) {
		t.Helper()
		if got != want || dumps != wantDumps {
			t.Errorf("%s: %v after %d dumps, want %v after %d", what, got, dumps, want, wantDumps)
		}
	}
	index := func(zone string) any {
		i, err := z.index(zone)
		if err != nil {
			return err.Error()
		}
		return i
	}
	check("name 2", z.name(2), "eth0", 1)
	check("index eth0", index("eth0"), uint32(2), 1)
	check("index 1 (a number)", index("1"), uint32(1), 1)
	check("name 1", z.name(1), "lo", 1)

	// veth9 appears, eth0 becomes wan0: misses refresh.
	host = []net.Interface{{Index: 1, Name: "lo"}, {Index: 2, Name: "wan0"}, {Index: 9, Name: "veth9"}}
	check("name 9, new", z.name(9), "veth9", 2)
	check("name 2, renamed", z.name(2), "wan0", 2)
	check("index veth9", index("veth9"), uint32(9), 2)
	check("index eth0, gone", index("eth0"), `unknown IPv6 zone "eth0"`, 3)
	check("name 5, none", z.name(5), "5", 4)
	check("index 5, none (a number)", index("5"), uint32(5), 5)

	// veth9 removed and made again with another index: a hit is stale
	// until the dump ages.
	host = []net.Interface{{Index: 1, Name: "lo"}, {Index: 2, Name: "wan0"}, {Index: 10, Name: "veth9"}}
	check("index veth9, cached", index("veth9"), uint32(9), 5)
	z.fetched = z.fetched.Add(-zoneCacheAge - time.Second)
	check("index veth9, aged", index("veth9"), uint32(10), 6)

	// A miss once the dump has aged takes one new dump, not a second
	// right after it (as package net's cache: a dump made for the age
	// answers the miss).
	z.fetched = z.fetched.Add(-zoneCacheAge - time.Second)
	check("name 42, aged", z.name(42), "42", 7)
	z.fetched = z.fetched.Add(-zoneCacheAge - time.Second)
	check("index 42, aged (a number)", index("42"), uint32(42), 8)
	z.fetched = z.fetched.Add(-zoneCacheAge - time.Second)
	check("index eth0, aged, gone", index("eth0"), `unknown IPv6 zone "eth0"`, 9)
}

// TestZoneCacheDumpsInOrder: two loops refresh the cache at once, the
// first dump (taken before an interface was renamed) finishing after the
// second: the cache must keep the newer one. The older overwrote it, and
// the rename went unseen by hits until the dump aged.
func TestZoneCacheDumpsInOrder(t *testing.T) {
	old := interfaces
	t.Cleanup(func() { interfaces = old })
	before := []net.Interface{{Index: 1, Name: "lo"}, {Index: 2, Name: "eth0"}}
	after := []net.Interface{{Index: 1, Name: "lo"}, {Index: 2, Name: "wan0"}}
	inFirst, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	interfaces = func() ([]net.Interface, error) {
		if calls.Add(1) == 1 {
			close(inFirst)
			<-release
			return before, nil
		}
		return after, nil
	}
	var z zoneCache
	first := make(chan string)
	go func() { first <- z.name(2) }() // the cache is empty: a dump
	<-inFirst
	if got := z.name(2); got != "wan0" { // empty still: a dump
		t.Fatalf("second lookup: %q, want wan0", got)
	}
	close(release)
	<-first
	if got := z.name(2); got != "wan0" || calls.Load() != 2 {
		t.Errorf("after both dumps: %q after %d dumps, want wan0 after 2", got, calls.Load())
	}
}

package engine

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// zoneCache maps network interface indexes to names and back, for IPv6
// zones (fe80::1%eth0), as package net's zone cache does: one interface
// dump fills both maps, and a lookup that misses, or that finds the dump
// older than zoneCacheAge (an interface renamed, or removed and another
// made under its name), takes a new one. Without it every link-local
// connection listed the host's interfaces (a netlink dump) on its loop
// thread two or three times: both of its addresses, and its dial. Any
// goroutine.
type zoneCache struct {
	mu      sync.RWMutex
	fetched time.Time
	gen     uint64 // the number of the dump in the maps (dumps's count)
	toIndex map[string]uint32
	toName  map[uint32]string
	// dumps counts the dumps started: of two taken at once, the one
	// started later is kept, whichever finishes last.
	dumps atomic.Uint64
}

// zoneCacheAge is how long a dump of the interfaces is trusted, as in
// package net.
var zoneCacheAge = time.Minute

// interfaces lists the host's network interfaces; tests count the calls.
var interfaces = net.Interfaces

// update takes a new dump if force is set or the last one is too old, and
// reports whether it did. It keeps the old maps if the dump fails.
func (z *zoneCache) update(force bool) bool {
	now := time.Now()
	z.mu.RLock()
	fresh := z.toName != nil && now.Sub(z.fetched) < zoneCacheAge
	z.mu.RUnlock()
	if fresh && !force {
		return false
	}
	gen := z.dumps.Add(1)
	ift, err := interfaces()
	if err != nil {
		return false
	}
	toIndex := make(map[string]uint32, len(ift))
	toName := make(map[uint32]string, len(ift))
	for _, ifi := range ift {
		toIndex[ifi.Name] = uint32(ifi.Index)
		toName[uint32(ifi.Index)] = ifi.Name
	}
	z.mu.Lock()
	if gen > z.gen {
		z.gen, z.fetched, z.toIndex, z.toName = gen, now, toIndex, toName
	}
	z.mu.Unlock()
	return true
}

func (z *zoneCache) lookupName(index uint32) (string, bool) {
	z.mu.RLock()
	defer z.mu.RUnlock()
	name, ok := z.toName[index]
	return name, ok
}

func (z *zoneCache) lookupIndex(name string) (uint32, bool) {
	z.mu.RLock()
	defer z.mu.RUnlock()
	index, ok := z.toIndex[name]
	return index, ok
}

// name names interface index as an IPv6 zone: its name, or the number if
// it has none now. A miss takes a new dump unless the lookup just took one.
func (z *zoneCache) name(index uint32) string {
	updated := z.update(false)
	name, ok := z.lookupName(index)
	if !ok && !updated {
		z.update(true)
		name, ok = z.lookupName(index)
	}
	if ok {
		return name
	}
	return strconv.FormatUint(uint64(index), 10)
}

// index returns the interface index an IPv6 zone names: an interface
// name, or a number as in package net. A miss takes a new dump unless the
// lookup just took one.
func (z *zoneCache) index(zone string) (uint32, error) {
	updated := z.update(false)
	if index, ok := z.lookupIndex(zone); ok {
		return index, nil
	}
	n, nerr := strconv.ParseUint(zone, 10, 32)
	if nerr == nil {
		if _, ok := z.lookupName(uint32(n)); ok {
			// The number of an interface the dump has (and no
			// interface is named so): no need for another.
			return uint32(n), nil
		}
	}
	if !updated && z.update(true) {
		if index, ok := z.lookupIndex(zone); ok {
			return index, nil
		}
	}
	if nerr != nil {
		return 0, fmt.Errorf("unknown IPv6 zone %q", zone)
	}
	return uint32(n), nil
}

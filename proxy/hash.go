package proxy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strings"

	"github.com/spindlenet/spindle/internal/h1"
	"github.com/spindlenet/spindle/internal/h2"
)

// Hash is the balance that sends each key to its server: Maglev
// consistent hashing (see HashConfig).
const Hash = "hash"

// HashConfig is a balance: hash pool's key and lookup table.
type HashConfig struct {
	// Key is what a request or client is hashed by: HashKeyClient
	// ("client", the default: the client's address, with trusted_proxies
	// its X-Forwarded-For client as rate_limit takes it; the only key of
	// a mode tcp listener's pool), "header:<Name>" (the first field of
	// that name; "header:Host" the request's host as routes match it,
	// lower-cased, an address as its address: routeHost, hostAddr; not
	// Cookie: an HTTP/2 client sends a field a cookie), "cookie:<name>"
	// (the first cookie of that name in the Cookie fields, as sent),
	// HashKeyPath ("path": the target's path, its query left out) or
	// "query:<param>" (the first value of the parameter in the target's
	// query, as sent). A request without the
	// field, cookie or parameter, or whose first one is empty, is hashed
	// by its client.
	Key string `yaml:"key" json:"key"`
	// TableSize is the Maglev lookup table's size: a prime from
	// MinHashTable to MaxHashTable, and at least 100 times the servers
	// (the Maglev paper's M >= 100N). Default DefaultHashTable (65537,
	// as Envoy's). A server's share of the keys is within about
	// servers/table_size of its share of the weights (a point at most).
	TableSize int `yaml:"table_size" json:"table_size"`
	// Seed keys the hash (SipHash-2-4, keyed with seed and 0): proxies
	// with the same seed, servers and weights send each key to the same
	// server. Default 0, which anyone knows: where clients choose the
	// key (header, query, path), a secret one keeps them from computing
	// many keys that all land on one server (doc.go: it does not keep
	// one from sending one key over and over: balance_factor does).
	Seed uint64 `yaml:"seed" json:"seed"`
	// BalanceFactor bounds each server's load (consistent hashing with
	// bounded loads: Mirrokni, Thorup and Zadimoghaddam, SODA 2018;
	// HAProxy's hash-balance-factor): a key's walk passes over a server
	// whose connections in flight (spindle_proxy_server_active, over
	// every loop), with this one, would be more than balance_factor
	// percent of its weight's share of all the servers' up. Default 0:
	// no bound; else from 100 (each at most its share, hardly hashing)
	// to 1000; 125 to 200 are usual.
	BalanceFactor int `yaml:"balance_factor,omitempty" json:"balance_factor,omitempty"`
}

// Hash keys (HashConfig.Key) and the table's bounds.
const (
	HashKeyClient    = "client"
	HashKeyPath      = "path"
	DefaultHashTable = 65537
	MinHashTable     = 127
	// MaxHashTable is Envoy's bound (5,000,011, the first prime above
	// 5,000,000): 100 entries a server is 6,400 for 64 servers, and
	// past about 500,000 a share's error (servers/table_size) is below
	// 0.02%, so a larger table buys nothing but its build, which runs on
	// the reload goroutine and grows faster than the table (the last
	// entries are found late along the permutations): 64 servers took
	// ~3.9 s at 16,777,213, the bound before (TestMaglevBuildAtCap logs
	// it at this one).
	MaxHashTable = 5000011
	// MaxHashServers bounds a hash pool's servers: a walk keeps the
	// servers it has taken in one 64-bit set.
	MaxHashServers = 64
)

// hashEntriesPerServer is the table's least size for each server (the
// Maglev paper's M >= 100N): each server claims an entry in the first
// turn whatever its weight, so its share of the entries misses its
// weight's by up to servers/table_size (64 servers in 127 entries gave
// one of weight 256 among 1s half of them, not 80%).
const hashEntriesPerServer = 100

// setDefaults fills in the key and the table's size.
func (h *HashConfig) setDefaults() {
	if h.Key == "" {
		h.Key = HashKeyClient
	}
	if h.TableSize == 0 {
		h.TableSize = DefaultHashTable
	}
}

// hashKind is what a key names.
type hashKind uint8

const (
	hashClient hashKind = iota
	hashHeader
	hashPath
	hashQuery
	hashCookie
)

// parseHashKey returns the kind of key k and the field's or parameter's
// name.
func parseHashKey(k string) (hashKind, string, error) {
	switch {
	case k == HashKeyClient:
		return hashClient, "", nil
	case k == HashKeyPath:
		return hashPath, "", nil
	case strings.HasPrefix(k, "header:"):
		n := k[len("header:"):]
		if n == "" || !h1.ValidField([]byte(n), nil) {
			return 0, "", fmt.Errorf("key: %q: the field name is not a token", k)
		}
		if strings.EqualFold(n, "Cookie") {
			return 0, "", fmt.Errorf("key: %q: an HTTP/1.1 client sends one Cookie field, an HTTP/2 client one a cookie: hash by \"cookie:<name>\"", k)
		}
		return hashHeader, n, nil
	case strings.HasPrefix(k, "cookie:"):
		n := k[len("cookie:"):]
		if n == "" || !h1.ValidField([]byte(n), nil) {
			return 0, "", fmt.Errorf("key: %q: the cookie name is not a token", k)
		}
		return hashCookie, n, nil
	case strings.HasPrefix(k, "query:"):
		n := k[len("query:"):]
		if n == "" || strings.ContainsAny(n, "&=#? \t") {
			return 0, "", fmt.Errorf("key: %q: the parameter name is empty or has one of &=#? or whitespace", k)
		}
		return hashQuery, n, nil
	}
	return 0, "", fmt.Errorf("key: unknown %q (want %q, \"header:<Name>\", \"cookie:<name>\", %q or \"query:<param>\")", k, HashKeyClient, HashKeyPath)
}

// validate checks h for a pool of n servers; the error begins with the
// field's name.
func (h *HashConfig) validate(n int) error {
	if _, _, err := parseHashKey(h.Key); err != nil {
		return err
	}
	if t := h.TableSize; t < MinHashTable || t > MaxHashTable || !prime(t) {
		return fmt.Errorf("table_size: %d is not a prime from %d to %d", t, MinHashTable, MaxHashTable)
	}
	if t := h.TableSize; t < hashEntriesPerServer*n {
		return fmt.Errorf("table_size: %d for %d servers, under %d entries a server (%d): the shares would miss the weights by more than a point", t, n, hashEntriesPerServer, hashEntriesPerServer*n)
	}
	if f := h.BalanceFactor; f != 0 && (f < 100 || f > 1000) {
		return fmt.Errorf("balance_factor: %d is not 0 or from 100 to 1000", f)
	}
	if n > MaxHashServers {
		return fmt.Errorf("servers: %d, more than balance %s takes (%d)", n, Hash, MaxHashServers)
	}
	return nil
}

// prime reports whether n (above 1) is prime.
func prime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// validateHash checks the pools' balance and hash sections (the error
// names the field), and refuses a key other than client in a mode tcp
// listener's pool: it has no request to take one from.
func (c *Config) validateHash() error {
	keys := map[string]string{}
	for i, p := range c.Pools {
		where := fmt.Sprintf("pools[%d] (%s)", i, p.Name)
		if p.Balance != Hash {
			if p.Hash != nil {
				return fmt.Errorf("%s.hash: only with balance %s", where, Hash)
			}
			continue
		}
		if err := p.Hash.validate(len(p.Servers)); err != nil {
			return fmt.Errorf("%s.hash.%w", where, err)
		}
		keys[p.Name] = p.Hash.Key
	}
	for i, l := range c.Listeners {
		if k, ok := keys[l.Pool]; ok && l.Mode == ModeTCP && k != HashKeyClient {
			return fmt.Errorf("listeners[%d] (%s).pool: pool %q hashes by %q, which a mode %s listener has not (its key is %q)", i, l.Name, l.Pool, k, ModeTCP, HashKeyClient)
		}
	}
	return nil
}

// maglev is a hash pool's lookup table (Eisenbud et al., "Maglev: A Fast
// and Reliable Software Network Load Balancer", NSDI 2016), built when
// the pool is made (New, a reload that changes it) and never written
// after: the loops read it without a lock. table[e] is the server of
// entry e; a key's entry is its hash modulo the table's (prime) size.
type maglev struct {
	table   []uint8
	entries []int // each server's entries in table
	seed    uint64
	kind    hashKind
	name    []byte // the header's or query parameter's name
	host    bool   // the key is header:Host (keyRequest takes the request's host)
	factor  int64  // balance_factor, 0 for none
}

// newMaglev builds the table of a pool of servers, each named by its
// address as configured (proxies that resolve a name to other addresses
// still agree), with their weights. Each server has its permutation of the
// entries, from its name's hash (offset, and a skip prime to the size),
// and the servers take turns claiming their next entry not yet taken, a
// server of weight w in w of each max(weights) turns (Envoy's weighted
// Maglev), until the table is full: each server's entries are its share
// of the weights to within about one per server, and a server added or
// removed moves few keys of the others.
func newMaglev(hc *HashConfig, servers []ServerConfig) *maglev {
	kind, name, _ := parseHashKey(hc.Key) // (validated)
	m := hc.TableSize
	n := len(servers)
	// pos[i] is server i's next entry along its permutation, offset +
	// k*skip modulo m for its k-th: each step adds skip and takes m off
	// past the end, which finds the same entries as the product and its
	// remainder, without a division a step.
	pos, skip, tgt := make([]int, n), make([]int, n), make([]int64, n)
	ws := make([]int64, n)
	maxW := int64(0)
	for i, s := range servers {
		h := sipHash(hc.Seed, 0, []byte(s.Address))
		pos[i] = int((h & 0xffffffff) % uint64(m))
		skip[i] = int((h>>32)%uint64(m-1)) + 1
		ws[i] = int64(s.Weight)
		maxW = max(maxW, ws[i])
	}
	// An entry not yet taken holds empty: there are at most
	// MaxHashServers servers, fewer than empty.
	const empty = 0xff
	t := make([]uint8, m)
	for e := range t {
		t[e] = empty
	}
	entries := make([]int, n)
	// The turns go in the order of the addresses, not of the config's
	// list: proxies that list the servers in other orders agree.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(servers[a].Address, servers[b].Address) })
	filled := 0
	for it := int64(1); filled < m; it++ {
		for _, i := range order {
			if filled == m {
				break
			}
			if it*ws[i] < tgt[i] {
				continue
			}
			tgt[i] += maxW
			e, sk := pos[i], skip[i]
			for t[e] != empty {
				if e += sk; e >= m {
					e -= m
				}
			}
			t[e] = uint8(i)
			entries[i]++
			filled++
			if e += sk; e >= m {
				e -= m
			}
			pos[i] = e
		}
	}
	return &maglev{table: t, entries: entries, seed: hc.Seed, kind: kind, name: []byte(name), factor: int64(hc.BalanceFactor),
		host: kind == hashHeader && strings.EqualFold(name, "Host")}
}

// entry returns a key hash's entry.
func (mg *maglev) entry(h uint64) int { return int(h % uint64(len(mg.table))) }

// hashEntries returns server i's entries in pl's table, 0 where pl does
// not hash.
func (pl *pool) hashEntries(i int) int {
	if pl.maglev == nil {
		return 0
	}
	return pl.maglev.entries[i]
}

// step returns the next server of d's walk over the hash pool's table:
// from the key's entry (d.start) on, the server of each entry in turn
// that the walk has not taken yet, so that a key whose server is down or
// full goes to the next entry's, which is another server for each run of
// entries: a server's keys spread over the others by their shares, and
// the others' keys stay where they are. false once every server is
// taken (or the whole table looked at). No allocation.
func (mg *maglev) step(d *dialing, n int) (int, bool) {
	m := len(mg.table)
	for d.tries < n && d.scan < m {
		e := d.start + d.scan
		if e >= m {
			e -= m
		}
		d.scan++
		i := int(mg.table[e])
		if d.seen&(1<<i) != 0 {
			continue
		}
		d.seen |= 1 << i
		d.tries++
		return i, true
	}
	return 0, false
}

// hashKey sets the request's client as key client takes it (hpeer),
// whatever the pool: a reload may make it hash while the request waits
// (rekey), and its key hash where its pool hashes (hkey: requestKey).
// Loop goroutine.
func (s *hsession) hashKey(r *h1.Request) {
	s.hpeer, s.hkey = s.ln.requestKey(s.pool, s.client.RemoteAddr().Addr(), r.Target, r.Host, len(r.Headers), func(k int) ([]byte, []byte) {
		return r.Headers[k].Name, r.Headers[k].Value
	})
}

// hashKey sets the stream's client and key hash (r's, whose host is its
// :authority, else its host field) as hsession.hashKey does. Loop
// goroutine.
func (st *h2stream) hashKey(r *h2.Request, host []byte) {
	st.hpeer, st.hkey = st.ln.requestKey(st.pool, st.c.client.RemoteAddr().Addr(), r.Path, host, len(r.Fields), func(k int) ([]byte, []byte) {
		return r.Fields[k].Name, r.Fields[k].Value
	})
}

// requestKey returns the client a request to l from peer stands for
// under key client (peer unmapped, then its X-Forwarded-For client where
// trusted_proxies lists it: forwardedClient, as rate_limit takes it),
// and the request's key hash in pl (keyRequest, which falls back to that
// client; 0 where pl does not hash, which pickServer and rekey then do
// not read), with one walk of the fields. Peer is unmapped first, as
// rate_limit's: a dual-stack listener's IPv4 peers come IPv4-mapped,
// which trusted_proxies' IPv4 networks do not contain. No allocation.
// Loop goroutine.
func (l *listener) requestKey(pl *pool, peer netip.Addr, target, host []byte, n int, field func(k int) (name, value []byte)) (netip.Addr, uint64) {
	client := l.forwardedClient(peer.Unmap(), n, field)
	if mg := pl.maglev; mg != nil {
		return client, mg.keyRequest(client, target, host, n, field)
	}
	return client, 0
}

// repool moves s's request, whose turn in its pool's queue came, to the
// pool's latest generation with its key hash there (repoolKeyed). Loop
// goroutine.
func (s *hsession) repool() {
	s.pool, s.hkey = repoolKeyed(s.pool, &s.failed, s.hkey, s.hpeer)
}

// repool is hsession.repool for a stream.
func (st *h2stream) repool() {
	st.pool, st.hkey = repoolKeyed(st.pool, &st.failed, st.hkey, st.hpeer)
}

// repool is hsession.repool for a mode tcp client.
func (s *session) repool() {
	s.pool, s.hkey = repoolKeyed(s.pool, &s.failed, s.hkey, s.client.RemoteAddr().Addr())
}

// repoolKeyed returns pl's latest generation (repool) for a waiter of pl
// whose key hash there is hkey and whose client is peer (its address, or
// a request's as key client takes it: hpeer), and
// the waiter's key hash in it (rekey). Loop goroutine.
func repoolKeyed(pl *pool, failed *uint64, hkey uint64, peer netip.Addr) (*pool, uint64) {
	np := repool(pl, failed)
	return np, rekey(pl, np, hkey, peer)
}

// rekey returns the key hash, in pool np, of a waiter of pool was whose
// key hash there is hkey, and whose turn came in np (repool: np is was's
// latest generation): hkey where np hashes by was's key and seed (it
// looks np's table up as a request of that key does now), else the hash
// of its client peer (a request's as key client takes it, after
// trusted_proxies: hpeer): np's key when it is client, and the key
// of a request without its field, which the waiter no longer holds (its
// head went to its pool's queue rewritten). A pool that did not hash
// gave it no key hash at all (0: requestKey), which took every such
// waiter to one entry. Loop goroutine.
func rekey(was, np *pool, hkey uint64, peer netip.Addr) uint64 {
	mg := np.maglev
	if mg == nil || np == was || mg.sameKey(was.maglev) {
		return hkey
	}
	return mg.keyAddr(peer)
}

// sameKey reports whether mg and o (nil for none) hash each request
// alike: the same key (a header's name in any case) and seed.
func (mg *maglev) sameKey(o *maglev) bool {
	if o == nil || o.seed != mg.seed || o.kind != mg.kind {
		return false
	}
	if mg.kind == hashHeader {
		return h1.EqualFold(o.name, mg.name)
	}
	return bytes.Equal(o.name, mg.name)
}

// load returns server i of pl's connections in flight over every loop
// (each loop's gauge, an atomic load: no lock). Any goroutine.
func (pl *pool) load(i int) int64 {
	if loadHook != nil {
		loadHook()
	}
	var a int64
	for _, sl := range pl.servers[i].loops {
		a += sl.stats.active.load()
	}
	return a
}

// loadHook, where set (tests), is called at each pool.load.
var loadHook func()

// poolLoads is a pick's sum of the loads and of the weights of a
// pool's servers up, taken at its first need (one pass over the
// servers) and kept for the rest of the walk.
type poolLoads struct {
	load, weight int64
	taken        bool
}

// overloaded reports whether server i of pl is over balance_factor's
// bound: its load with one more above factor percent of its weight's
// share of the servers up's loads with one more (rounded up, so that
// the shares' sum is at least the loads': some server up is always
// under its bound). The servers up's loads are summed into tot once a
// pick (a walk), not at each server it looks at. false where pl has no
// bound. Loop goroutine.
func (pl *pool) overloaded(i int, tot *poolLoads) bool {
	mg := pl.maglev
	if mg == nil || mg.factor == 0 {
		return false
	}
	if !tot.taken {
		tot.taken = true
		for j, s := range pl.servers {
			if s.up() {
				tot.load += pl.load(j)
				tot.weight += int64(pl.cfg.Servers[j].Weight)
			}
		}
	}
	m, w := tot.load, tot.weight
	if w == 0 {
		return false
	}
	wi := int64(pl.cfg.Servers[i].Weight)
	// load+1 > ceil(factor*(m+1)*wi / (100*w))
	bound := (mg.factor*(m+1)*wi + 100*w - 1) / (100 * w)
	return pl.load(i)+1 > bound
}

// overTaken returns the next server d's walk passed over at
// balance_factor's bound that is still up, where every other server is
// taken (down, refusing or full): a key goes over the bound rather than
// nowhere. Loop goroutine.
func (d *dialing) overTaken(ls *loopState, pl *pool) (int, bool) {
	for d.over != 0 {
		i := bits.TrailingZeros64(d.over)
		d.over &^= 1 << i
		if pl.servers[i].up() && !ls.share(pl, i).idle.gone {
			d.dialed = true
			return i, true
		}
	}
	return 0, false
}

// step returns the next server of d's walk over pl: round-robin and
// least-conn take the servers in index order from d.start, each once; a
// hash pool follows its table (maglev.step). The caller checks the
// server's state. Loop goroutine.
func (d *dialing) step(pl *pool) (int, bool) {
	n := len(pl.servers)
	if pl.maglev != nil {
		return pl.maglev.step(d, n)
	}
	if d.tries >= n {
		return 0, false
	}
	i := (d.start + d.tries) % n
	d.tries++
	return i, true
}

// keyAddr hashes a client's address (unmapped; an IPv6 address whole:
// a host may have a /64, but the key is the client's, as HAProxy's
// balance source and nginx's hash $remote_addr take it).
func (mg *maglev) keyAddr(a netip.Addr) uint64 {
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		return sipHash(mg.seed, 0, b[:])
	}
	b := a.As16()
	return sipHash(mg.seed, 0, b[:])
}

// keyRequest hashes a request of client (as key client takes it:
// requestKey) with target (origin- or absolute-form; an HTTP/2
// request's :path), host (the Host field's value; an HTTP/2 request's
// :authority, else its host field) and the n fields field returns, by
// the pool's key: the client where the key is client or the request has
// no such field or parameter, or its first one is empty (as HAProxy's
// hdr and url_param: every client that sends an empty one would go to
// one server). Key header:Host takes the host routing takes (routeHost:
// the target's authority, else host; an HTTP/2 client sends :authority
// rather than Host, and its requests go where HTTP/1.1 ones to the same
// host do), lower-cased as it is hashed, and an address host (hostAddr:
// dotted-decimal IPv4, an IPv6 literal, an IPv4-mapped one as IPv4) as
// its address, as keyAddr hashes it: a host goes to one server however it
// is written ("[0:0::1]" as "[::1]", "[::ffff:127.0.0.1]" as
// "127.0.0.1"), as it goes to one route. No allocation. Loop goroutine.
func (mg *maglev) keyRequest(client netip.Addr, target, host []byte, n int, field func(k int) (name, value []byte)) uint64 {
	switch mg.kind {
	case hashHeader:
		if mg.host {
			a, _ := h1.SplitTarget(target)
			if h := routeHost(a, host); len(h) > 0 {
				if ip, ok := hostAddr(h); ok {
					return mg.keyAddr(ip)
				}
				return sipHashFold(mg.seed, 0, h)
			}
			break
		}
		for k := range n {
			if name, v := field(k); h1.EqualFold(name, mg.name) {
				if len(v) > 0 {
					return sipHash(mg.seed, 0, v)
				}
				break
			}
		}
	case hashCookie:
		for k := range n {
			if name, v := field(k); h1.EqualFold(name, cookieField) {
				if c, ok := cookieValue(v, mg.name); ok {
					if len(c) > 0 {
						return sipHash(mg.seed, 0, c)
					}
					break
				}
			}
		}
	case hashPath:
		return sipHash(mg.seed, 0, targetPath(target))
	case hashQuery:
		if v, ok := queryParam(target, mg.name); ok && len(v) > 0 {
			return sipHash(mg.seed, 0, v)
		}
	}
	return mg.keyAddr(client)
}

// targetPath returns a request target's path: origin-form up to its
// query, absolute-form's after its authority ("/" for none), "*" and an
// authority-form target as they are.
func targetPath(t []byte) []byte {
	if len(t) > 0 && t[0] != '/' {
		if i := bytes.Index(t, []byte("://")); i >= 0 {
			rest := t[i+3:]
			j := bytes.IndexAny(rest, "/?")
			if j < 0 || rest[j] == '?' {
				return []byte("/")
			}
			t = rest[j:]
		}
	}
	if i := bytes.IndexByte(t, '?'); i >= 0 {
		t = t[:i]
	}
	return t
}

// cookieField is the Cookie field's name, cookieSep its pairs' separator.
var cookieField, cookieSep = []byte("cookie"), []byte(";")

// cookieValue returns the value of the first cookie name in a Cookie
// field's value v ("a=1; name=v; ...", each pair's spaces and tabs
// around it left out; a pair without '=' is no cookie), as sent (quotes
// and all), and whether there is one.
func cookieValue(v, name []byte) ([]byte, bool) {
	for len(v) > 0 {
		var p []byte
		p, v, _ = bytes.Cut(v, cookieSep)
		p = bytes.Trim(p, " \t")
		if j := bytes.IndexByte(p, '='); j >= 0 && bytes.Equal(p[:j], name) {
			return p[j+1:], true
		}
	}
	return nil, false
}

// queryParam returns the value of the first parameter name in target's
// query ("a=1&name=v&..."; a parameter without '=' has the empty value),
// as sent (not decoded), and whether there is one.
func queryParam(target, name []byte) ([]byte, bool) {
	i := bytes.IndexByte(target, '?')
	if i < 0 {
		return nil, false
	}
	q := target[i+1:]
	if j := bytes.IndexByte(q, '#'); j >= 0 {
		q = q[:j]
	}
	for len(q) > 0 {
		var p []byte
		p, q, _ = bytes.Cut(q, querySep)
		if k, v, _ := bytes.Cut(p, queryEq); bytes.Equal(k, name) {
			return v, true
		}
	}
	return nil, false
}

var querySep, queryEq = []byte{'&'}, []byte{'='}

// sipHash is SipHash-2-4 (Aumasson and Bernstein, 2012) of p keyed with
// k0 and k1: a keyed 64-bit hash, the same in every process (unlike
// hash/maphash, whose seeds are random per process), so that proxies
// with the same seed agree on each key's server, and one whose outputs a
// client cannot steer without the key (a fixed, unkeyed hash such as
// FNV or xxHash with seed 0 lets a client find keys that all land on one
// server). It is the hash of Go's runtime maps before Swiss tables, and
// of Linux's and Python's hash tables.
func sipHash(k0, k1 uint64, p []byte) uint64 { return sipHashAs(k0, k1, p, false) }

// sipHashFold is sipHash of p with its ASCII capitals lower-cased (a
// host's case does not matter: RFC 9110 4.2.3), folded a word at a time
// as it is read: no copy.
func sipHashFold(k0, k1 uint64, p []byte) uint64 { return sipHashAs(k0, k1, p, true) }

// foldWord lower-cases the ASCII capitals of the 8 bytes in m: a byte
// from 'A' to 'Z' gains 0x20, any other (above 0x7f included) is left
// as it is. Each byte's low 7 bits plus 0x80-'A' carry into its top bit
// where they are 'A' or more, plus 0x80-'Z'-1 where above 'Z', and
// neither carries out of its byte.
func foldWord(m uint64) uint64 {
	const hi = 0x8080808080808080
	low := m &^ hi
	ge := low + 0x3f3f3f3f3f3f3f3f // 0x80 - 'A'
	gt := low + 0x2525252525252525 // 0x80 - 'Z' - 1
	return m | (ge&^gt&^m&hi)>>2
}

// sipHashAs is sipHash of p, folded (sipHashFold) where fold.
func sipHashAs(k0, k1 uint64, p []byte, fold bool) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(p)
	for len(p) >= 8 {
		m := binary.LittleEndian.Uint64(p)
		if fold {
			m = foldWord(m)
		}
		v3 ^= m
		round()
		round()
		v0 ^= m
		p = p[8:]
	}
	var last [8]byte
	copy(last[:], p)
	m := binary.LittleEndian.Uint64(last[:])
	if fold {
		m = foldWord(m)
	}
	m |= uint64(byte(n)) << 56
	v3 ^= m
	round()
	round()
	v0 ^= m
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}

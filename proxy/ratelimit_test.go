package proxy

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/h1"
)

const ms = int64(time.Millisecond)

// at is a clock stopped at now.
func at(now int64) func() int64 { return func() int64 { return now } }

// testClock is a clock that moves when told.
type testClock struct{ t atomic.Int64 }

func (c *testClock) now() int64 { return c.t.Load() }

// TestGCRA: 10 per second (one each 100ms) with a burst of 3 on one cell,
// by a fake clock: 3 at once, the 4th refused for 100ms, one again
// exactly at its time (not 1ns before), a full burst after idling, and
// one each 100ms for good at the steady rate.
func TestGCRA(t *testing.T) {
	var c atomic.Int64
	T, tau := 100*ms, 300*ms
	steps := []struct {
		now  int64
		ok   bool
		wait int64
	}{
		{0, true, 0}, {0, true, 0}, {0, true, 0}, {0, false, 100 * ms},
		{99 * ms, false, 1 * ms}, {99*ms + 999999, false, 1}, {100 * ms, true, 0}, {100 * ms, false, 100 * ms},
		{1000 * ms, true, 0}, {1000 * ms, true, 0}, {1000 * ms, true, 0}, {1000 * ms, false, 100 * ms},
		{1100 * ms, true, 0}, {1200 * ms, true, 0}, {1300 * ms, true, 0}, {1300 * ms, false, 100 * ms},
		{1350 * ms, false, 50 * ms}, {1400 * ms, true, 0},
	}
	for i, s := range steps {
		ok, wait, _ := gcra(&c, &c, new(lowering), at(s.now), T, tau)
		if ok != s.ok || wait != s.wait {
			t.Fatalf("step %d at %v: allowed %v, wait %v; want %v, %v", i, time.Duration(s.now), ok, time.Duration(wait), s.ok, time.Duration(s.wait))
		}
	}
	// A budget 10 hours ahead (spent under a longer limit before a
	// reload) counts as spent to this one's burst.
	var r atomic.Int64
	r.Store(10 * int64(time.Hour))
	if ok, wait, _ := gcra(&r, &r, new(lowering), at(0), T, tau); ok || wait != T {
		t.Fatalf("a budget 10h ahead: allowed %v, wait %v; want refused for %v", ok, time.Duration(wait), time.Duration(T))
	}
	if ok, _, _ := gcra(&r, &r, new(lowering), at(T), T, tau); !ok {
		t.Fatalf("a budget 10h ahead, an interval later: refused")
	}
	// Burst 1: strictly one per interval.
	var d atomic.Int64
	for i, s := range []struct {
		now int64
		ok  bool
	}{{5 * ms, true}, {5 * ms, false}, {104 * ms, false}, {105 * ms, true}, {205 * ms, true}, {304 * ms, false}} {
		if ok, _, _ := gcra(&d, &d, new(lowering), at(s.now), T, T); ok != s.ok {
			t.Fatalf("burst 1, step %d: allowed %v, want %v", i, ok, s.ok)
		}
	}
}

// TestGCRAGiveBack: an arrival given back leaves the cell as the
// decisions without it would have (interval 100, burst 10): exactly where
// none came after it, or where others were allowed on top of it before
// its interval began to pass; less (what of its interval has passed)
// where time moved, and nothing once its interval has passed, where
// another allowed after it took the budget from its own arrival time.
// Given back later still, an arrival behind others gives back nothing
// though the budget without it would be lower (0, 0, 0, 150: 300), as it
// may be higher (0, 100, 150, 150 leave the same cell, 400, and 400
// without the first): what the cell and the time tell cannot say which.
func TestGCRAGiveBack(t *testing.T) {
	const T, tau = 100, 1000
	for _, c := range []struct {
		name     string
		arrivals []int64 // times of those allowed
		ours     int     // the one given back
		back     int64   // when
		want     int64   // the cell after
	}{
		{"alone", []int64{0}, 0, 0, 0},
		{"alone, later", []int64{500}, 0, 550, 550}, // (the same budget as 500 from 550 on)
		{"under others", []int64{0, 0, 0}, 0, 0, 200},
		{"under another, half passed", []int64{0, 50}, 0, 50, 150},
		{"passed", []int64{0, 100}, 0, 100, 200},
		{"in debt", []int64{0, 0, 0, 10, 20}, 3, 30, 400},
		{"in debt, passed", []int64{0, 0, 0, 150}, 0, 150, 400},
		{"passed, the same cell", []int64{0, 100, 150, 150}, 0, 150, 400},
	} {
		var cell atomic.Int64
		var ours int64
		for k, now := range c.arrivals {
			ok, _, tat := gcra(&cell, &cell, new(lowering), at(now), T, tau)
			if !ok {
				t.Fatalf("%s: arrival %d refused", c.name, k)
			}
			if k == c.ours {
				ours = tat
			}
		}
		giveBack(&cell, new(lowering), lowMark{}, at(c.back), T, ours)
		if got := cell.Load(); got != c.want {
			t.Errorf("%s: cell %d, want %d", c.name, got, c.want)
		}
	}
}

// TestAdmitRefusedKeyClient: a client a route's limit refuses keeps its
// budget of the listener's limit of key client (burst 2): 2 pass to the
// listener's pool after 5 refused.
func TestAdmitRefusedKeyClient(t *testing.T) {
	var clock testClock
	clock.t.Store(5 * ms)
	l := &listener{
		limit:   testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 2}, 1, &clock),
		rlimits: []*limiter{testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}, 1, &clock)},
	}
	l.rlimits[0].tab.cells[0].Store(clock.now() + int64(time.Hour)) // (spent)
	a := netip.MustParseAddr("192.0.2.1")
	for k := range 5 {
		if l.admit(0, 0, a) == 0 {
			t.Fatalf("request %d to the route admitted", k)
		}
	}
	for k, want := range []bool{true, true, false} {
		if got := l.admit(0, 1, a) == 0; got != want {
			t.Fatalf("request %d to the pool: admitted %v, want %v", k, got, want)
		}
	}
}

// TestAdmitGivesBack: where another loop spends the route's budget
// between admit's check and its spending (here the route's clock, read
// at each, does it at its second read), the request is refused and the
// listener's budget (key all) is as it was.
func TestAdmitGivesBack(t *testing.T) {
	var clock testClock
	clock.t.Store(5 * ms)
	rc := RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}
	l := &listener{
		limit:   testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 10, Key: RateKeyAll}, 1, &clock),
		rlimits: []*limiter{testLimiter(t, rc, 1, &clock)},
	}
	rm := l.rlimits[0]
	reads := 0
	rm.clock = func() int64 {
		if reads++; reads == 2 {
			rm.tab.cells[0].Store(clock.now() + rm.t) // (another loop's request)
		}
		return clock.now()
	}
	before := l.limit.tab.cells[0].Load()
	if wait := l.admit(0, 0, netip.Addr{}); wait <= 0 {
		t.Fatalf("admitted, the route's budget spent meanwhile")
	}
	// (Back to now: the same budget as before to decisions from now on.)
	if got, want := l.limit.tab.cells[0].Load(), max(before, clock.now()); got != want {
		t.Errorf("the listener's cell %d, want %d (as before)", got, want)
	}
}

// TestAdmitAcrossGoroutines: requests decided at once by 8 goroutines
// against a listener's limit (key all, burst 100) and a route's (key all,
// burst 10) spend of the listener's budget only the 10 the route let
// pass, the others refused by the route at its check or given back after
// losing the route's budget to another goroutine: 90 pass after them to
// the listener's pool.
func TestAdmitAcrossGoroutines(t *testing.T) {
	for range 20 {
		var clock testClock
		clock.t.Store(5 * ms)
		l := &listener{
			limit:   testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 100, Key: RateKeyAll}, 8, &clock),
			rlimits: []*limiter{testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 10, Key: RateKeyAll}, 8, &clock)},
		}
		var passed atomic.Int64
		var wg sync.WaitGroup
		for id := range 8 {
			wg.Go(func() {
				for range 20 {
					if l.admit(id, 0, netip.Addr{}) == 0 {
						passed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if passed.Load() != 10 {
			t.Fatalf("%d passed the route's burst of 10", passed.Load())
		}
		n := 0
		for l.admit(0, 1, netip.Addr{}) == 0 {
			n++
		}
		if n != 90 {
			t.Fatalf("%d passed to the listener's pool after, want 90", n)
		}
	}
}

func testLimiter(t *testing.T, rc RateLimitConfig, loops int, clock *testClock) *limiter {
	t.Helper()
	rc.setDefaults()
	if err := rc.validate(); err != nil {
		t.Fatal(err)
	}
	return newLimiter(&rc, nil, loops, clock.now)
}

// TestLimiterKeys: key client gives each address its own budget, an IPv6
// one per /64 (and an IPv4-mapped one as its IPv4); key all one budget.
func TestLimiterKeys(t *testing.T) {
	var clock testClock
	burst := func(lm *limiter, a string, now int64) int {
		clock.t.Store(now)
		n := 0
		for range 10 {
			if ok, _ := lm.allow(0, netip.MustParseAddr(a)); ok {
				n++
			}
		}
		return n
	}
	lm := testLimiter(t, RateLimitConfig{Rate: 1, Burst: 2}, 1, &clock)
	for _, c := range []struct {
		addr string
		want int
	}{
		{"127.0.0.1", 2}, {"127.0.0.2", 2}, {"127.0.0.1", 0}, {"::ffff:127.0.0.2", 0},
		{"2001:db8::1", 2}, {"2001:db8::ffff:2", 0}, {"2001:db8:0:1::1", 2}, {"2001:db8::1%eth0", 0},
	} {
		if n := burst(lm, c.addr, 0); n != c.want {
			t.Errorf("%s: %d allowed, want %d", c.addr, n, c.want)
		}
	}
	if n := burst(lm, "127.0.0.1", int64(time.Second)); n != 1 {
		t.Errorf("127.0.0.1 a second later: %d allowed, want 1", n)
	}
	all := testLimiter(t, RateLimitConfig{Rate: 1, Burst: 3, Key: RateKeyAll}, 1, &clock)
	if n := burst(all, "127.0.0.1", 0) + burst(all, "127.0.0.2", 0); n != 3 {
		t.Errorf("key all: %d allowed to two clients, want 3", n)
	}
	tot := all.totals()
	if tot.Allowed != 3 || tot.Limited != 17 {
		t.Errorf("key all: totals %+v, want 3 allowed, 17 limited", tot)
	}
}

// TestLimiterCollisionsNeverLooser: in tables too small for their
// clients (2 to 1024 cells for 30 addresses, each sending 7 times its
// rate), every request the table allows is one an exact limiter of its
// own per client (a map) allows too: a collision only ever refuses more.
func TestLimiterCollisionsNeverLooser(t *testing.T) {
	for _, size := range []int{2, 4, 64, 1024} {
		var clock testClock
		lm := testLimiter(t, RateLimitConfig{Rate: 50, Burst: 5, TableSize: size}, 1, &clock)
		exact := map[netip.Addr]*atomic.Int64{}
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		now, allowed := int64(0), 0
		for range 20000 {
			now += rng.Int64N(200 * int64(time.Microsecond))
			a := netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(30))})
			e := exact[a]
			if e == nil {
				e = new(atomic.Int64)
				exact[a] = e
			}
			clock.t.Store(now)
			got, _ := lm.allow(0, a)
			if !got {
				continue
			}
			allowed++
			if ok, _, _ := gcra(e, e, &lm.tab.low, at(now), lm.t, lm.tau); !ok {
				t.Fatalf("table of %d: a request of %v allowed at %v that its own budget refuses", size, a, time.Duration(now))
			}
		}
		if allowed == 0 {
			t.Fatalf("table of %d: nothing allowed", size)
		}
	}
}

// TestLimiterExactAcrossGoroutines: 8 goroutines (as loops) deciding
// requests of one client, and of key all, at one instant: exactly the
// burst is allowed, not more.
func TestLimiterExactAcrossGoroutines(t *testing.T) {
	for _, key := range []string{RateKeyClient, RateKeyAll} {
		var clock testClock
		clock.t.Store(5 * ms)
		lm := testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 100, Key: key}, 8, &clock)
		var wg sync.WaitGroup
		for id := range 8 {
			wg.Go(func() {
				for range 1000 {
					lm.allow(id, netip.MustParseAddr("192.0.2.1"))
				}
			})
		}
		wg.Wait()
		if tot := lm.totals(); tot.Allowed != 100 || tot.Limited != 7900 {
			t.Errorf("key %s: %+v, want 100 allowed, 7900 limited", key, tot)
		}
	}
}

// TestLimiterNeverAboveRate: over 100 periods, each decision taken at
// the earliest time the limiter lets one pass, no more pass than rate per
// period and the burst: the interval per/rate, where it is not whole
// nanoseconds, is rounded up, not down (7 per 1µs: 143ns, not 142ns, 705
// passing with burst 1, 4 too many, as with burst 5; 999 per 100µs: 101ns,
// not 100ns, 100 too many); where rounding would move the rate by more
// than 1% (600 per 1µs, 3 per 10ns) the configuration is refused. (Over
// 1000 periods it made 2 million decisions, 12 to 21 s under -race.)
func TestLimiterNeverAboveRate(t *testing.T) {
	const periods = 100
	for _, rc := range []RateLimitConfig{
		{Rate: 7, Per: Duration(time.Microsecond), Burst: 1},
		{Rate: 7, Per: Duration(time.Microsecond), Burst: 5},
		{Rate: 999, Per: Duration(100 * time.Microsecond), Burst: 3},
		{Rate: 1000, Per: Duration(time.Microsecond), Burst: 1},
	} {
		var clock testClock
		lm := testLimiter(t, rc, 1, &clock)
		span := periods * int64(rc.Per)
		n := 0
		for clock.now() <= span {
			ok, wait := lm.allow(0, netip.MustParseAddr("192.0.2.1"))
			if ok {
				n++
			} else {
				clock.t.Add(wait)
			}
		}
		if max := periods*rc.Rate + rc.Burst; n > max {
			t.Errorf("%d per %v, burst %d: %d passed in %d periods, more than %d", rc.Rate, time.Duration(rc.Per), rc.Burst, n, periods, max)
		}
	}
	for _, c := range []struct {
		rc   RateLimitConfig
		want string
	}{
		{RateLimitConfig{Rate: 600, Per: Duration(time.Microsecond)}, "rate_limit.rate: 600 per 1µs: an interval of 1.667ns is not whole nanoseconds to within 1%"},
		{RateLimitConfig{Rate: 3, Per: Duration(10)}, "rate_limit.rate: 3 per 10ns: an interval of 3.333ns is not whole nanoseconds to within 1%"},
	} {
		c.rc.setDefaults()
		if err := c.rc.validate(); err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v, want %q", c.rc, err, c.want)
		}
	}
}

// TestLimiterAllocs: a decision allocates nothing.
func TestLimiterAllocs(t *testing.T) {
	var clock testClock
	lm := testLimiter(t, RateLimitConfig{Rate: 1000}, 1, &clock)
	a6 := netip.MustParseAddr("2001:db8::1")
	a4 := netip.MustParseAddr("192.0.2.1")
	if n := testing.AllocsPerRun(1000, func() {
		clock.t.Add(ms)
		lm.allow(0, a6)
		lm.allow(0, a4)
	}); n != 0 {
		t.Errorf("%v allocations per decision, want 0", n)
	}
}

func TestRetrySeconds(t *testing.T) {
	for _, c := range []struct{ wait, want int64 }{{1, 1}, {int64(time.Second), 1}, {int64(time.Second) + 1, 2}, {int64(90 * time.Second), 90}} {
		if got := retrySeconds(c.wait); got != c.want {
			t.Errorf("retrySeconds(%v) = %d, want %d", time.Duration(c.wait), got, c.want)
		}
	}
}

// TestRateLimitConfig: defaults, and each refusal naming its field.
func TestRateLimitConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
listeners:
  - {name: web, listen: "127.0.0.1:0", mode: http, pool: app, rate_limit: {rate: 100},
     routes: [{path_prefix: /api/, pool: app, rate_limit: {rate: 5, per: 1m, burst: 2, key: all}}]}
  - {name: raw, listen: "127.0.0.1:0", pool: app, rate_limit: {rate: 10, burst: 1, table_size: 1024}}
pools: [{name: app, servers: ["127.0.0.1:1"]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := *cfg.Listeners[0].RateLimit, (RateLimitConfig{Rate: 100, Per: Duration(time.Second), Burst: 100, Key: RateKeyClient, TableSize: DefaultRateTableSize}); got != want {
		t.Errorf("listener web: %+v, want %+v", got, want)
	}
	if got, want := *cfg.Listeners[0].Routes[0].RateLimit, (RateLimitConfig{Rate: 5, Per: Duration(time.Minute), Burst: 2, Key: RateKeyAll}); got != want {
		t.Errorf("route: %+v, want %+v", got, want)
	}
	if got := cfg.Listeners[1].RateLimit.TableSize; got != 1024 {
		t.Errorf("table_size %d, want 1024", got)
	}
	y, err := cfg.YAML()
	if err != nil || !strings.Contains(string(y), "rate_limit:") || !strings.Contains(string(y), "per: 1m0s") {
		t.Errorf("-check's YAML has no rate_limit: %v\n%s", err, y)
	}

	for _, c := range []struct{ rl, want string }{
		{`{per: 1s}`, "listeners[0] (web).rate_limit.rate: 0 below 1"},
		{`{rate: -1}`, "rate_limit.rate: -1 below 1"},
		{`{rate: 1, per: -1s}`, "rate_limit.per: -1s is not positive"},
		{`{rate: 1, per: 25h}`, "rate_limit.per: 25h0m0s longer than 24h"},
		{`{rate: 2000000000, per: 1s}`, "rate_limit.rate: 2000000000 per 1s: more than one a nanosecond"},
		{`{rate: 1, burst: -2}`, "rate_limit.burst: -2 below 1"},
		{`{rate: 1, per: 24h, burst: 200000}`, "rate_limit.burst: 200000 intervals of 24h0m0s are past an int64 of nanoseconds"},
		{`{rate: 1, key: host}`, `rate_limit.key: unknown "host" (want "client" or "all")`},
		{`{rate: 1, table_size: 1000}`, "rate_limit.table_size: 1000 is not a power of two from 2 to 16777216"},
		{`{rate: 1, table_size: 33554432}`, "rate_limit.table_size: 33554432 is not a power of two from 2 to 16777216"},
		{`{rate: 1, key: all, table_size: 64}`, "rate_limit.table_size: only with key client"},
		{`{rate: 1, delay: 1s}`, "field delay not found"},
	} {
		_, err := ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", mode: http, pool: app, rate_limit: ` + c.rl + `}]
pools: [{name: app, servers: ["127.0.0.1:1"]}]
`))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rate_limit %s: %v, want %q", c.rl, err, c.want)
		}
	}
	_, err = ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", mode: http, pool: app, routes: [{pool: app, rate_limit: {rate: 0}}]}]
pools: [{name: app, servers: ["127.0.0.1:1"]}]
`))
	if want := "listeners[0] (web).routes[0].rate_limit.rate: 0 below 1"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("route's rate_limit: %v, want %q", err, want)
	}
}

// FuzzParseAddr: parseAddr takes what netip.ParseAddr takes (but zones)
// and makes the same address of it.
func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "0.0.0.0", "255.255.255.255", "01.2.3.4", "1.2.3", "1.2.3.4.5", "256.1.1.1",
		"::", "::1", "2001:db8::1", "2001:db8:0:0:0:0:0:1", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9",
		"1::2::3", "12345::", "1:2:3:4:5:6:1.2.3.4", "::1.2.3.4", "fe80::1%eth0", "[::1]", "1.2.3.4:80", "", "unknown"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseAddr([]byte(s))
		want, err := netip.ParseAddr(s)
		if strings.Contains(s, "%") {
			if ok {
				t.Fatalf("parseAddr(%q) = %v with a zone, want refused", s, got)
			}
			return
		}
		if ok != (err == nil) || ok && got != want {
			t.Fatalf("parseAddr(%q) = %v, %v; netip.ParseAddr: %v, %v", s, got, ok, want, err)
		}
	})
}

// TestForwardedClient: the address a client's requests are limited by:
// its own, or from a trusted proxy the X-Forwarded-For address nearest
// the end that trusted_proxies does not list; found allocating nothing.
func TestForwardedClient(t *testing.T) {
	l := &listener{cfg: ListenerConfig{TrustedProxies: Prefixes{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}}
	for _, c := range []struct {
		peer string
		xff  []string
		want string
	}{
		{"192.0.2.1", []string{"203.0.113.1"}, "192.0.2.1"}, // (not trusted)
		{"10.0.0.1", nil, "10.0.0.1"},
		{"10.0.0.1", []string{"203.0.113.1"}, "203.0.113.1"},
		{"10.0.0.1", []string{"198.51.100.1, 203.0.113.1"}, "203.0.113.1"},
		{"10.0.0.1", []string{"198.51.100.1", "203.0.113.1, 10.0.0.2 ,10.0.0.3"}, "203.0.113.1"},
		{"10.0.0.1", []string{"198.51.100.1", "10.0.0.2,,"}, "198.51.100.1"},
		{"10.0.0.1", []string{"10.0.0.5, 10.0.0.2"}, "10.0.0.5"},
		{"10.0.0.1", []string{"203.0.113.1, unknown, 10.0.0.2"}, "10.0.0.2"},
		{"10.0.0.1", []string{"203.0.113.1:4000"}, "10.0.0.1"},
		{"fd00::1", []string{"2001:db8::7, fd00::2"}, "2001:db8::7"},
		{"10.0.0.1", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
	} {
		hs := []h1.Header{{Name: []byte("Accept"), Value: []byte("*/*")}}
		for _, v := range c.xff {
			hs = append(hs, h1.Header{Name: []byte("x-forwarded-for"), Value: []byte(v)})
		}
		got := l.forwardedClient(netip.MustParseAddr(c.peer), len(hs), func(k int) ([]byte, []byte) { return hs[k].Name, hs[k].Value })
		if got != netip.MustParseAddr(c.want) {
			t.Errorf("from %s with X-Forwarded-For %q: %v, want %s", c.peer, c.xff, got, c.want)
		}
	}
	hs := []h1.Header{{Name: []byte("X-Forwarded-For"), Value: []byte("2001:db8::1, 203.0.113.1, 10.0.0.2")}}
	peer := netip.MustParseAddr("10.0.0.1")
	if n := testing.AllocsPerRun(100, func() {
		l.forwardedClient(peer, len(hs), func(k int) ([]byte, []byte) { return hs[k].Name, hs[k].Value })
	}); n != 0 {
		t.Errorf("%v allocations a walk, want 0", n)
	}
}

// TestAdmitGivesBackReload: where a reload shortens the listener's burst
// (10 to 2, key all, the budget kept by name) and another loop's request
// under it brings the budget back to the new burst (spent to it) between
// admit's spending and its give-back, the give-back takes nothing: the
// budget without the arrival given back would be spent to the new burst
// too, so the next request under the new limit is refused (it passed
// before: one interval given back below the new burst).
func TestAdmitGivesBackReload(t *testing.T) {
	var clock testClock
	clock.t.Store(5 * ms)
	old := RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 10, Key: RateKeyAll}
	l := &listener{
		limit:   testLimiter(t, old, 1, &clock),
		rlimits: []*limiter{testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}, 1, &clock)},
	}
	lm, rm := l.limit, l.rlimits[0]
	lm.tab.cells[0].Store(clock.now() + 9*lm.t) // (9 of the 10 spent)
	short := old
	short.Burst = 2
	nlm := newLimiter(&short, lm, 1, clock.now)
	if nlm.tab != lm.tab {
		t.Fatal("the reload's limiter has a table of its own")
	}
	reads := 0
	rm.clock = func() int64 {
		if reads++; reads == 2 {
			rm.tab.cells[0].Store(clock.now() + rm.t)    // (another loop's request to the route)
			if ok, _ := nlm.allow(0, netip.Addr{}); ok { // (and one under the reload's limit)
				t.Fatal("a request under the reload's burst of 2 admitted, 10 spent")
			}
		}
		return clock.now()
	}
	if wait := l.admit(0, 0, netip.Addr{}); wait <= 0 {
		t.Fatalf("admitted, the route's budget spent meanwhile")
	}
	if ok, _ := nlm.allow(0, netip.Addr{}); ok {
		t.Errorf("a request under the reload's burst of 2 admitted after the give-back: the budget is spent to it (cell %v ahead)",
			time.Duration(lm.tab.cells[0].Load()-clock.now()))
	}
}

// TestGCRAGiveBackAfterAnother: two arrivals on two loops at 0 (interval
// 100, burst 3, the budget unspent), the first given back at 0; a third
// allowed at 50 on top of the second; the second given back at 50. The
// budget is then the third's alone, 150: the second's stored time (200)
// is behind it by the first's interval given back, so only 50 of its
// interval is still ahead at 50. Given back by 100 (its stored time less
// now), the cell went to 100: with two more at 50 (the burst of 3 with
// the third), one passed at 100 too, 4 in a window of 50 (at most the
// burst, 3, in less than an interval).
func TestGCRAGiveBackAfterAnother(t *testing.T) {
	const T, tau = 100, 300
	var cell atomic.Int64
	var lw lowering
	spend := func(now int64) int64 {
		t.Helper()
		ok, _, tat := gcra(&cell, &cell, &lw, at(now), T, tau)
		if !ok {
			t.Fatalf("an arrival at %d refused", now)
		}
		return tat
	}
	first, second := spend(0), spend(0)
	giveBack(&cell, &lw, lowMark{}, at(0), T, first)
	spend(50)
	giveBack(&cell, &lw, lowMark{}, at(50), T, second)
	if got := cell.Load(); got < 150 {
		t.Errorf("the cell %d after the second given back, want 150 (the third's alone)", got)
	}
	spend(50)
	spend(50)
	if ok, _, _ := gcra(&cell, &cell, &lw, at(100), T, tau); ok {
		t.Errorf("a 4th allowed at 100, 3 at 50: over the burst of 3 in a window of 50")
	}
}

// TestAdmitCounts: the counters say what happened to each request under
// a listener's limit (key all, burst 3) and a route's (key all, burst 1):
// one that passes both is allowed by both; one the route refuses, at its
// check or at its spending (another loop's request spending the route's
// budget between the two, the listener's given back), is limited by the
// route and not counted by the listener, which allowed nothing that
// passed; one the listener refuses is limited by the listener and not
// counted by the route, which decided nothing.
func TestAdmitCounts(t *testing.T) {
	var clock testClock
	clock.t.Store(5 * ms)
	l := &listener{
		limit:   testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 3, Key: RateKeyAll}, 1, &clock),
		rlimits: []*limiter{testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}, 1, &clock)},
	}
	lm, rm := l.limit, l.rlimits[0]
	check := func(step string, wantL, wantR RateLimitTotals) {
		t.Helper()
		if got := lm.totals(); got != wantL {
			t.Errorf("%s: the listener's totals %+v, want %+v", step, got, wantL)
		}
		if got := rm.totals(); got != wantR {
			t.Errorf("%s: the route's totals %+v, want %+v", step, got, wantR)
		}
	}
	if l.admit(0, 0, netip.Addr{}) != 0 {
		t.Fatal("the first request refused")
	}
	check("passed", RateLimitTotals{Allowed: 1}, RateLimitTotals{Allowed: 1})
	if l.admit(0, 0, netip.Addr{}) == 0 {
		t.Fatal("the route's second request admitted")
	}
	check("refused by the route's check", RateLimitTotals{Allowed: 1}, RateLimitTotals{Allowed: 1, Limited: 1})
	rm.tab.cells[0].Store(0) // (the route's budget unspent again)
	reads := 0
	rm.clock = func() int64 {
		if reads++; reads == 2 {
			rm.tab.cells[0].Store(clock.now() + rm.t) // (another loop's request)
		}
		return clock.now()
	}
	if l.admit(0, 0, netip.Addr{}) == 0 {
		t.Fatal("admitted, the route's budget spent meanwhile")
	}
	check("refused at the route's spending", RateLimitTotals{Allowed: 1}, RateLimitTotals{Allowed: 1, Limited: 2})
	for range 2 {
		if l.admit(0, 1, netip.Addr{}) != 0 {
			t.Fatal("a request to the listener's pool refused within its burst")
		}
	}
	if l.admit(0, 0, netip.Addr{}) == 0 {
		t.Fatal("admitted past the listener's burst")
	}
	check("refused by the listener", RateLimitTotals{Allowed: 3, Limited: 1}, RateLimitTotals{Allowed: 1, Limited: 2})
}

// TestLimiterReloadRate: a reload that changes a limit's interval (rate
// or per) keeps each budget's share spent, in requests, not its lead in
// time: 10 spent of a burst of 10 at one a second, the limit made one a
// minute, leave none (the lead of 10s was a sixth of an interval of the
// new limit: 10 more passed at once), and 5 spent at one a minute, made
// one a second, leave 5 (the lead of 5 minutes was past the new burst:
// none passed); key client's cells each as their own budget, key all's
// one.
func TestLimiterReloadRate(t *testing.T) {
	for _, key := range []string{RateKeyClient, RateKeyAll} {
		for _, c := range []struct {
			from, to time.Duration
			spend    int
		}{{time.Second, time.Minute, 10}, {time.Minute, time.Second, 5}} {
			var clock testClock
			clock.t.Store(5 * ms)
			old := testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(c.from), Burst: 10, Key: key}, 1, &clock)
			a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
			for range c.spend {
				if ok, _ := old.allow(0, a); !ok {
					t.Fatalf("key %s, per %v: refused within the burst", key, c.from)
				}
			}
			rc := old.cfg
			rc.Per = Duration(c.to)
			lm := newLimiter(&rc, old, 1, clock.now)
			n := 0
			for range 20 {
				if ok, _ := lm.allow(0, a); ok {
					n++
				}
			}
			if want := 10 - c.spend; n != want {
				t.Errorf("key %s, %d spent at one per %v, made one per %v: %d passed, want %d", key, c.spend, c.from, c.to, n, want)
			}
			if key == RateKeyClient {
				m := 0
				for range 20 {
					if ok, _ := lm.allow(0, b); ok {
						m++
					}
				}
				if m != 10 {
					t.Errorf("another client after the reload: %d passed, want 10", m)
				}
			}
			if got := lm.totals(); got.Allowed != old.totals().Allowed || got.Allowed < uint64(c.spend) {
				t.Errorf("key %s: counters %+v not kept over the reload", key, got)
			}
		}
	}
}

// TestAdmitWaitBoth: a request refused by the listener's limit (one each
// 10s) that the route's (one an hour) would refuse too gets the wait
// until it would pass both, the hour's (Retry-After: the seconds until a
// request would pass), not the listener's 10s, after which the route's
// refuses it again; and one refused by the route's, the listener's
// allowing it, the route's wait.
func TestAdmitWaitBoth(t *testing.T) {
	var clock testClock
	clock.t.Store(5 * ms)
	l := &listener{
		limit:   testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(10 * time.Second), Burst: 1, Key: RateKeyAll}, 1, &clock),
		rlimits: []*limiter{testLimiter(t, RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}, 1, &clock)},
	}
	if l.admit(0, 0, netip.Addr{}) != 0 {
		t.Fatal("the first request refused")
	}
	if got, want := l.admit(0, 0, netip.Addr{}), int64(time.Hour); got != want {
		t.Errorf("refused by both: wait %v, want %v", time.Duration(got), time.Duration(want))
	}
	clock.t.Add(int64(10 * time.Second))
	if got, want := l.admit(0, 0, netip.Addr{}), int64(time.Hour-10*time.Second); got != want {
		t.Errorf("refused by the route: wait %v, want %v", time.Duration(got), time.Duration(want))
	}
}

package proxy

import (
	"testing"
	"time"
)

// passivePool returns a pool of n servers (no engine) with passive health
// (fails 1, http_errors 1, cooldown a minute) under max_ejected_percent
// pct, on a clock standing at 1s: the server methods' inputs.
func passivePool(t *testing.T, n, pct int) *pool {
	t.Cleanup(func() { ejectStep = nil })
	pl := &pool{shared: new(poolShared), passive: &PassiveConfig{Fails: 1, HTTPErrors: 1,
		Cooldown: Duration(time.Minute), MaxCooldown: Duration(10 * time.Minute), MaxEjectedPercent: new(pct)}}
	for range n {
		pl.servers = append(pl.servers, &server{now: func() int64 { return int64(time.Second) }})
	}
	return pl
}

// TestEjectReasonAtomic: a connect's success on another loop between an
// ejection for failed exchanges being recorded and the rest of eject's
// bookkeeping sees the ejection's reason with it: the ejection stands (it
// is not ended as one for failed connects, to be made again and counted
// twice).
func TestEjectReasonAtomic(t *testing.T) {
	pl := passivePool(t, 1, 100)
	s := pl.servers[0]
	ejectStep = func(srv *server, stage int) {
		if stage == ejectMade {
			srv.connected(pl)
		}
	}
	s.exchanged(pl, false)
	if !s.ejected() || s.ejections[ejectHTTP].Load() != 1 {
		t.Fatalf("a connect's success in eject's midst: ejected %v, %d http ejections; want ejected, 1", s.ejected(), s.ejections[ejectHTTP].Load())
	}
	ejectStep = nil
	s.exchanged(pl, false)
	if n := s.ejections[ejectHTTP].Load(); n != 1 || s.streak.Load() != 1 {
		t.Errorf("the next failure: %d ejections, streak %d; want 1 and 1 (ejected already)", n, s.streak.Load())
	}
}

// TestEjectRecheck: under max_ejected_percent a loop that found the
// server in, while another loop ejected it before this one took the
// pool's gate, finds it ejected under the gate: no refusal is counted.
func TestEjectRecheck(t *testing.T) {
	pl := passivePool(t, 2, 50)
	s := pl.servers[0]
	other := false
	ejectStep = func(srv *server, stage int) {
		if stage == ejectRead && !other {
			other = true
			srv.eject(pl, ejectHTTP) // another loop, at that moment
		}
	}
	s.exchanged(pl, false)
	if !other || !s.ejected() || s.ejections[ejectHTTP].Load() != 1 {
		t.Fatalf("ejected %v, %d ejections; want ejected once", s.ejected(), s.ejections[ejectHTTP].Load())
	}
	if n := pl.shared.refused.Load(); n != 0 {
		t.Errorf("%d ejections refused, want 0: the server was ejected, by the other loop", n)
	}
}

// TestMaxEjectedCountsDown: max_ejected_percent counts the servers the
// active checks hold down with those ejected: of two servers under 50%,
// with one down, the other's ejection is refused (it is the one taking
// traffic); of three under 67%, one down, one more can be ejected, not
// two. At 100% nothing is refused.
func TestMaxEjectedCountsDown(t *testing.T) {
	for _, c := range []struct {
		n, pct, down int
		want         []bool // each server's ejection after its failure, in order, from the first one up
	}{
		{2, 50, 1, []bool{false}},
		{3, 67, 1, []bool{true, false}},
		{2, 100, 1, []bool{true}},
		{3, 34, 0, []bool{true, false, false}},
	} {
		pl := passivePool(t, c.n, c.pct)
		for i := range c.down {
			pl.servers[c.n-1-i].down.Store(true)
		}
		refused := 0
		for i, want := range c.want {
			s := pl.servers[i]
			s.exchanged(pl, false)
			if s.ejected() != want {
				t.Errorf("%d servers, %d%%, %d down: server %d ejected %v, want %v", c.n, c.pct, c.down, i, s.ejected(), want)
			}
			if !want {
				refused++
			}
		}
		if n := pl.shared.refused.Load(); n != uint64(refused) {
			t.Errorf("%d servers, %d%%, %d down: %d refused, want %d", c.n, c.pct, c.down, n, refused)
		}
		up := false
		for _, s := range pl.servers {
			up = up || s.up()
		}
		if c.pct < 100 && !up {
			t.Errorf("%d servers, %d%%, %d down: none up", c.n, c.pct, c.down)
		}
	}
}

// TestMaxEjectedAfterReload: a failure of a request made with a pool a
// reload replaced is bounded by max_ejected_percent over the pool in
// force: of its servers B and C (the reload took A out) under 50%, with
// C ejected, B's failure reported with the pool before ({A, B}, where
// only B would be out) is refused, and a server of the pool stays up.
func TestMaxEjectedAfterReload(t *testing.T) {
	old := passivePool(t, 2, 50)
	cur := passivePool(t, 1, 50)
	cur.shared = old.shared
	b := old.servers[1]
	cur.servers = []*server{b, cur.servers[0]}
	old.shared.q.pool.Store(cur) // (setCaps)
	c := cur.servers[1]
	c.exchanged(cur, false)
	if !c.ejected() {
		t.Fatal("C not ejected: the first of the pool's two may be")
	}
	b.exchanged(old, false)
	if !b.up() {
		t.Errorf("B ejected through the pool before the reload: none of B and C up under max_ejected_percent 50")
	}
}

// TestConnectEjectionOutlastsStragglers: a connect that succeeds while
// its server is ejected for failed connects was dialed before the
// ejection (an ejected server gets no new dials): the ejection stands,
// with its streak and its count of failures, so the cooldown runs whole
// and the next ejection is longer. A success once the cooldown has run
// out ends the ejection and its streak.
func TestConnectEjectionOutlastsStragglers(t *testing.T) {
	pl := passivePool(t, 1, 100)
	s := pl.servers[0]
	now := int64(time.Second)
	s.now = func() int64 { return now }
	s.connectFailed(pl)
	if !s.ejected() {
		t.Fatal("a failed connect (fails 1) did not eject the server")
	}
	s.connected(pl) // a connect dialed before the ejection
	if !s.ejected() || s.streak.Load() != 1 || s.fails.Load() != 1 {
		t.Fatalf("a straggling connect's success: ejected %v, streak %d, fails %d; want ejected, 1, 1", s.ejected(), s.streak.Load(), s.fails.Load())
	}
	now += int64(time.Minute) // the cooldown has run out
	if s.ejected() {
		t.Fatal("still ejected after the cooldown")
	}
	s.connectFailed(pl)
	if want := now + 2*int64(time.Minute); !s.ejected() || s.until.Load()&^untilHTTP < want {
		t.Fatalf("the next failure: ejected %v until %v; want ejected for two cooldowns (until %v)", s.ejected(), time.Duration(s.until.Load()), time.Duration(want))
	}
	now += 2 * int64(time.Minute)
	s.connected(pl)
	if s.until.Load() != 0 || s.streak.Load() != 0 || s.fails.Load() != 0 {
		t.Fatalf("a success after the cooldown: until %d, streak %d, fails %d; want 0, 0, 0", s.until.Load(), s.streak.Load(), s.fails.Load())
	}
}

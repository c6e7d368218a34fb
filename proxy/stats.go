package proxy

// Totals are the proxy's counters summed over its loops, as /metrics
// shows them.
type Totals struct {
	Listeners []ListenerTotals
	Servers   []ServerTotals
}

// ListenerTotals are one listener's counters.
type ListenerTotals struct {
	Name                                             string
	Accepted, Rejected, NoServer, Failed, IdleClosed uint64
	Active                                           int64
}

// ServerTotals are one server's counters, in one pool.
type ServerTotals struct {
	Pool, Server                          string
	Connects, Failures, BytesIn, BytesOut uint64
	Active                                int64
	// Up: the server takes new connections (neither the active checks
	// nor passive health mark it down).
	Up                         bool
	CheckFailures, CheckPasses uint64
	// PassiveDown: passive health has the server ejected; Ejections
	// counts its ejections.
	PassiveDown bool
	Ejections   uint64
}

// Totals sums the loops' counters. The loops keep counting meanwhile: the
// sums are of values read one by one, not of one instant. Any goroutine.
func (p *Proxy) Totals() Totals {
	var t Totals
	for _, l := range p.lns {
		lt := ListenerTotals{Name: l.name}
		for _, ls := range p.loops {
			s := &ls.ln[l.idx]
			lt.Accepted += s.accepted.load()
			lt.Rejected += s.rejected.load()
			lt.NoServer += s.noServer.load()
			lt.Failed += s.failed.load()
			lt.IdleClosed += s.idleClosed.load()
			lt.Active += s.active.load()
		}
		t.Listeners = append(t.Listeners, lt)
	}
	for _, pl := range p.pools {
		for _, srv := range pl.servers {
			st := ServerTotals{Pool: pl.name, Server: srv.addr, Up: srv.up(), CheckFailures: srv.checkFails.Load(), CheckPasses: srv.checkPasses.Load(), PassiveDown: srv.ejected(), Ejections: srv.ejections.Load()}
			for _, ls := range p.loops {
				s := &ls.srv[pl.idx][srv.idx]
				st.Connects += s.connects.load()
				st.Failures += s.failures.load()
				st.BytesIn += s.bytesIn.load()
				st.BytesOut += s.bytesOut.load()
				st.Active += s.active.load()
			}
			t.Servers = append(t.Servers, st)
		}
	}
	return t
}

package hpack

// entrySize is an entry's size as RFC 7541 4.1 counts it.
func entrySize(nl, vl int) uint64 { return uint64(nl) + uint64(vl) + 32 }

type entry struct {
	off, nl, vl int    // name at buf[off:off+nl], value right after it
	hn, h       uint64 // encoder only: hashes of the name and of name+value
}

// table is a dynamic table (RFC 7541 2.3.2): entries in insertion order in
// ents[head:] (newest last), their bytes back to back in buf[start:]. An
// eviction moves head and start; an insertion appends. Space before start is
// reclaimed by moving the live bytes to the front once it is at least half
// of buf, or when buf is grown (to twice what is live after the insertion),
// so buf's capacity stays within twice the size limit and, once grown, the
// table allocates no more. ents is reclaimed the same way.
type table struct {
	buf   []byte
	start int
	ents  []entry
	head  int
	used  uint64 // sum of entrySize of the live entries
	limit uint32 // the current maximum size (set by size updates)
}

func (t *table) len() int { return len(t.ents) - t.head }

// at returns the i-th newest entry, i from 1 to t.len().
func (t *table) at(i int) *entry { return &t.ents[len(t.ents)-i] }

func (t *table) field(e *entry) (name, value []byte) {
	v := e.off + e.nl
	return t.buf[e.off:v:v], t.buf[v : v+e.vl : v+e.vl]
}

// evictTo evicts oldest entries until the size is at most n (RFC 7541 4.3).
func (t *table) evictTo(n uint64) {
	for t.used > n {
		e := &t.ents[t.head]
		t.used -= entrySize(e.nl, e.vl)
		t.head++
		t.start = e.off + e.nl + e.vl
	}
	if t.head == len(t.ents) {
		t.ents, t.head = t.ents[:0], 0
		t.buf, t.start = t.buf[:0], 0
	}
}

// setLimit applies a dynamic table size update.
func (t *table) setLimit(n uint32) {
	t.limit = n
	t.evictTo(uint64(n))
}

// add inserts name+value as the newest entry, first evicting what RFC 7541
// 4.4 says; an entry larger than the limit empties the table and is not
// added. name and value must not alias t.buf.
func (t *table) add(name, value []byte, hn, h uint64) {
	size := entrySize(len(name), len(value))
	if size > uint64(t.limit) {
		t.evictTo(0)
		return
	}
	t.evictTo(uint64(t.limit) - size)
	need := len(name) + len(value)
	if len(t.buf)+need > cap(t.buf) {
		live := len(t.buf) - t.start
		var nb []byte
		if t.start >= cap(t.buf)/2 && live+need <= cap(t.buf) {
			nb = t.buf[:live]
		} else {
			nb = make([]byte, live, 2*(live+need))
		}
		copy(nb, t.buf[t.start:])
		for i := t.head; i < len(t.ents); i++ {
			t.ents[i].off -= t.start
		}
		t.buf, t.start = nb, 0
	}
	if len(t.ents) == cap(t.ents) && t.head > 0 && t.head >= cap(t.ents)/2 {
		n := copy(t.ents, t.ents[t.head:])
		t.ents, t.head = t.ents[:n], 0
	}
	off := len(t.buf)
	t.buf = append(t.buf, name...)
	t.buf = append(t.buf, value...)
	t.ents = append(t.ents, entry{off: off, nl: len(name), vl: len(value), hn: hn, h: h})
	t.used += size
}

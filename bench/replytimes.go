package bench

import "time"

// replyTimes counts a run's verified replies by the millisecond they were
// received in, from origin on.
type replyTimes struct {
	origin time.Time
	perMS  []uint64
}

// before is the number of replies received before t, those of t's own
// millisecond pro rata.
func (r replyTimes) before(t time.Time) float64 {
	x := float64(t.Sub(r.origin)) / float64(time.Millisecond)
	var n float64
	for i, c := range r.perMS {
		switch {
		case float64(i+1) <= x:
			n += float64(c)
		case float64(i) < x:
			return n + float64(c)*(x-float64(i))
		default:
			return n
		}
	}
	return n
}

// between is the number of replies received from from to to.
func (r replyTimes) between(from, to time.Time) float64 {
	return r.before(to) - r.before(from)
}

// windowRate is a measurement's request rate, by which a counter's
// change between two reads becomes a figure per request.
type windowRate struct {
	// replies were received in the window, window long.
	replies uint64
	window  time.Duration
	// times are when every reply of the run came, in the window or not;
	// empty where that is not known.
	times replyTimes
}

// over is the request rate for a counter read at from and to, d apart by
// the counter's own clock: the replies received between the two reads per
// second of d, so that the counter's change over d at that rate is its
// change per request of the same interval. A read answered late, after the
// load stopped, lengthens the interval without adding requests to it, and
// the figure per request stays the interval's. Where the times of the
// replies or of the reads are not known, it is the window's rate.
func (w windowRate) over(from, to time.Time, d time.Duration) float64 {
	if w.times.perMS == nil || from.IsZero() || !to.After(from) || d <= 0 {
		if w.window <= 0 {
			return 0
		}
		return float64(w.replies) / w.window.Seconds()
	}
	return w.times.between(from, to) / d.Seconds()
}

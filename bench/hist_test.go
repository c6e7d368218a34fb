package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the nearest-rank percentile of sorted values.
func exactQuantile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

func within(got, want time.Duration, rel float64) bool {
	return math.Abs(float64(got-want)) <= rel*float64(want)+1
}

func TestHistogramPercentiles(t *testing.T) {
	tests := []struct {
		name string
		gen  func(r *rand.Rand, i int) time.Duration
		n    int
	}{
		{"uniform 1..1000µs", func(r *rand.Rand, i int) time.Duration { return time.Duration(1+r.IntN(1000)) * time.Microsecond }, 100000},
		{"exponential tail", func(r *rand.Rand, i int) time.Duration {
			return time.Duration((20 + r.ExpFloat64()*30) * float64(time.Microsecond))
		}, 200000},
		{"ramp", func(r *rand.Rand, i int) time.Duration { return time.Duration(i+1) * time.Microsecond }, 10000},
		{"one value", func(r *rand.Rand, i int) time.Duration { return 42 * time.Microsecond }, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tc.n)))
			h := NewHistogram()
			vals := make([]time.Duration, tc.n)
			for i := range vals {
				vals[i] = tc.gen(r, i)
				h.Record(vals[i])
			}
			slices.Sort(vals)
			if h.Count() != int64(tc.n) {
				t.Fatalf("count %d, want %d", h.Count(), tc.n)
			}
			for _, p := range []float64{50, 90, 99, 99.9, 99.99, 100} {
				got, want := h.Quantile(p), exactQuantile(vals, p)
				if !within(got, want, 0.002) {
					t.Errorf("p%v = %v, exact %v (beyond 0.2%%)", p, got, want)
				}
			}
			if !within(h.Max(), vals[len(vals)-1], 0.002) {
				t.Errorf("max %v, want %v", h.Max(), vals[len(vals)-1])
			}
			pc := h.Percentiles()
			// The JSON figures are in µs.
			if want := float64(exactQuantile(vals, 99)) / float64(time.Microsecond); math.Abs(pc.P99-want) > 0.002*want+1e-3 {
				t.Errorf("Percentiles().P99 = %v µs, exact %v µs", pc.P99, want)
			}
			if !(pc.P50 <= pc.P90 && pc.P90 <= pc.P99 && pc.P99 <= pc.P999 && pc.P999 <= pc.P9999 && pc.P9999 <= pc.Max) {
				t.Errorf("percentiles not monotone: %+v", pc)
			}
		})
	}
}

func TestHistogramMerge(t *testing.T) {
	// Four "threads" record disjoint slices of one data set; the merged
	// histogram must equal one histogram that recorded everything.
	r := rand.New(rand.NewPCG(7, 9))
	all := NewHistogram()
	parts := []*Histogram{NewHistogram(), NewHistogram(), NewHistogram(), NewHistogram()}
	var vals []time.Duration
	for i := range 40000 {
		// Each part gets a different distribution so that merging matters.
		d := time.Duration(float64((i%4+1)*10)*(1+r.Float64())) * time.Microsecond
		vals = append(vals, d)
		all.Record(d)
		parts[i%4].Record(d)
	}
	merged := NewHistogram()
	for _, p := range parts {
		merged.Merge(p)
	}
	if merged.Count() != all.Count() {
		t.Fatalf("merged count %d, want %d", merged.Count(), all.Count())
	}
	slices.Sort(vals)
	for _, p := range []float64{0, 50, 90, 99, 99.9, 99.99, 100} {
		if merged.Quantile(p) != all.Quantile(p) {
			t.Errorf("p%v merged %v != single %v", p, merged.Quantile(p), all.Quantile(p))
		}
		if !within(merged.Quantile(p), exactQuantile(vals, max(p, 1e-9)), 0.002) {
			t.Errorf("p%v merged %v, exact %v", p, merged.Quantile(p), exactQuantile(vals, p))
		}
	}
	// The merged median lies between the parts' medians (different distributions).
	if !(merged.Quantile(50) > parts[0].Quantile(50) && merged.Quantile(50) < parts[3].Quantile(50)) {
		t.Errorf("merged median %v not between part medians %v and %v", merged.Quantile(50), parts[0].Quantile(50), parts[3].Quantile(50))
	}
}

func TestHistogramClampAndEmpty(t *testing.T) {
	h := NewHistogram()
	if h.Quantile(99) != 0 || h.Count() != 0 {
		t.Fatalf("empty histogram: p99=%v count=%d", h.Quantile(99), h.Count())
	}
	h.Record(-5)
	h.Record(2 * time.Minute)
	if h.Count() != 2 || h.Overflow() != 1 {
		t.Fatalf("count=%d overflow=%d, want 2 and 1", h.Count(), h.Overflow())
	}
	if !within(h.Max(), time.Minute, 0.002) {
		t.Errorf("max %v, want about a minute", h.Max())
	}
	sp := h.Spectrum()
	if len(sp) != len(spectrumPercentiles) || sp[len(sp)-1].Percentile != 100 {
		t.Errorf("spectrum %v", sp)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := NewHistogram()
	b.ReportAllocs()
	d := 17 * time.Microsecond
	for b.Loop() {
		h.Record(d)
		d += 13
	}
}

// TestHistogramQuantileNearestRank: a percentile is the nearest rank, the
// ceiling of p/100 × count, as exactQuantile takes it and Java's
// HdrHistogram does, not the rank rounded to the nearest: where the slow
// requests of a window are just over 1 %, p99 is slow. Two latencies, far
// apart, make a rank off by one show as a thousandfold error.
func TestHistogramQuantileNearestRank(t *testing.T) {
	const fast, slow = 10 * time.Microsecond, 10 * time.Millisecond
	tests := []struct {
		name        string
		nFast, nSlw int
		p           float64
	}{
		// 11 of 1070 slow is 1.03 %: the 1060th value, the first whose
		// rank reaches 99 % (1059.3), is slow.
		{"p99, 1.03% slow", 1059, 11, 99},
		// 10 of 1000 is exactly 1 %: 99 % of the values are fast.
		{"p99, exactly 1% slow", 990, 10, 99},
		{"p99.9, 1% slow", 990, 10, 99.9},
		// 2 of 16000 is 0.0125 %: the 15999th value (rank 15998.4) is slow.
		{"p99.99, 0.0125% slow", 15998, 2, 99.99},
		{"p99.99, 0.01% slow", 19998, 2, 99.99},
		{"p50, one of two slow", 1, 1, 50},
		{"p50, two of three slow", 1, 2, 50},
		{"p90, one of ten slow", 9, 1, 90},
		{"p90, one of eleven slow", 10, 1, 90},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistogram()
			var vals []time.Duration
			for range tc.nFast {
				h.Record(fast)
				vals = append(vals, fast)
			}
			for range tc.nSlw {
				h.Record(slow)
				vals = append(vals, slow)
			}
			got, want := h.Quantile(tc.p), exactQuantile(vals, tc.p)
			if !within(got, want, 0.002) {
				t.Errorf("p%v of %d at %v and %d at %v = %v, nearest rank %v", tc.p, tc.nFast, fast, tc.nSlw, slow, got, want)
			}
			if pc := h.Percentiles(); tc.p == 99 && !within(time.Duration(pc.P99*1e3), want, 0.002) {
				t.Errorf("Percentiles().P99 = %v µs, nearest rank %v", pc.P99, want)
			}
		})
	}
}

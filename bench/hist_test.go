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

package bench

import (
	"fmt"
	"math"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: latencies are recorded in nanoseconds from 1 ns to one
// minute with three significant digits (0.1 % resolution).
const (
	histLowest  = 1
	histHighest = int64(time.Minute)
	histDigits  = 3
)

// Histogram is an HDR latency histogram in nanoseconds. Each client thread
// owns one; they are merged once the threads are done. A Histogram is not
// safe for concurrent use: call its methods from one goroutine at a time.
type Histogram struct {
	h        *hdrhistogram.Histogram
	overflow int64 // values above the trackable range, clamped to it
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{h: hdrhistogram.New(histLowest, histHighest, histDigits)}
}

// Record adds one latency. Values below 1 ns count as 1 ns; values above a
// minute count as a minute and are tallied in Overflow. One goroutine at a time.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < histLowest {
		v = histLowest
	}
	if v > histHighest {
		v = histHighest
		h.overflow++
	}
	// Cannot fail: v is inside the trackable range.
	_ = h.h.RecordValue(v)
}

// Merge adds every value of other into h. One goroutine at a time.
func (h *Histogram) Merge(other *Histogram) {
	h.h.Merge(other.h)
	h.overflow += other.overflow
}

// Count is the number of recorded values. One goroutine at a time.
func (h *Histogram) Count() int64 { return h.h.TotalCount() }

// Overflow is the number of values that exceeded a minute. One goroutine at a time.
func (h *Histogram) Overflow() int64 { return h.overflow }

// Quantile returns the latency at percentile p (0..100): the smallest
// recorded value such that p percent of values are at or below it (the
// nearest rank, the ceiling of p/100 × Count), to the histogram's
// resolution. It returns 0 for an empty histogram. One goroutine at a time.
func (h *Histogram) Quantile(p float64) time.Duration {
	n := h.h.TotalCount()
	if n == 0 || !(p > 0) {
		return time.Duration(h.h.ValueAtPercentile(0))
	}
	// hdrhistogram-go takes the rank p/100 × n rounded to the nearest, not
	// up (Java's HdrHistogram takes the ceiling): with 11 slow replies of
	// 1070 (1.03 %), its p99 was the 1059th value, a fast one. Asked for
	// the percentile of the nearest rank itself, its rounding lands on it.
	return time.Duration(h.h.ValueAtPercentile(100 * float64(nearestRank(p, n)) / float64(n)))
}

// nearestRank is the rank, from 1 to n, of percentile p (0..100) of n
// values: the ceiling of p/100 × n, less a relative 1e-12 so that a
// product that lands on an integer, give or take the rounding of p/100
// (99.9 % of 1000), is not taken one rank up.
func nearestRank(p float64, n int64) int64 {
	r := int64(math.Ceil(p / 100 * float64(n) * (1 - 1e-12)))
	return min(max(r, 1), n)
}

// Max returns the largest recorded value (to the histogram's resolution). One goroutine at a time.
func (h *Histogram) Max() time.Duration { return time.Duration(h.h.Max()) }

// Mean returns the mean of the recorded values. One goroutine at a time.
func (h *Histogram) Mean() time.Duration { return time.Duration(h.h.Mean()) }

// Percentiles holds the standard latency percentiles, in microseconds.
type Percentiles struct {
	// P50 is the median latency in µs.
	P50 float64 `json:"p50_us"`
	// P90 is the 90th percentile in µs.
	P90 float64 `json:"p90_us"`
	// P99 is the 99th percentile in µs.
	P99 float64 `json:"p99_us"`
	// P999 is the 99.9th percentile in µs.
	P999 float64 `json:"p99_9_us"`
	// P9999 is the 99.99th percentile in µs.
	P9999 float64 `json:"p99_99_us"`
	// Max is the largest latency in µs.
	Max float64 `json:"max_us"`
	// Mean is the mean latency in µs.
	Mean float64 `json:"mean_us"`
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// Percentiles summarizes h. One goroutine at a time.
func (h *Histogram) Percentiles() Percentiles {
	return Percentiles{
		P50:   us(h.Quantile(50)),
		P90:   us(h.Quantile(90)),
		P99:   us(h.Quantile(99)),
		P999:  us(h.Quantile(99.9)),
		P9999: us(h.Quantile(99.99)),
		Max:   us(h.Max()),
		Mean:  us(h.Mean()),
	}
}

// latencyFigures are what a result keeps of its latencies h (Result's
// Latency, LatencyClamped and LatencyCount, and the side-by-side
// results'): their percentiles, how many were past the histogram's minute
// and how many there were. One goroutine at a time.
func (h *Histogram) latencyFigures() (p Percentiles, clamped, count int64) {
	return h.Percentiles(), h.Overflow(), h.Count()
}

// SpectrumPoint is one point of a latency percentile spectrum.
type SpectrumPoint struct {
	// Percentile is in 0..100.
	Percentile float64 `json:"percentile"`
	// LatencyUS is the latency at Percentile, in µs.
	LatencyUS float64 `json:"latency_us"`
}

// spectrumPercentiles are the points of a percentile spectrum: 9s up to
// 99.999 with intermediate halves, in the style of HdrHistogram plots.
var spectrumPercentiles = []float64{0, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999, 100}

// Spectrum returns the latency at a fixed set of percentiles from 0 to 100,
// for plotting. One goroutine at a time.
func (h *Histogram) Spectrum() []SpectrumPoint {
	out := make([]SpectrumPoint, 0, len(spectrumPercentiles))
	for _, p := range spectrumPercentiles {
		out = append(out, SpectrumPoint{Percentile: p, LatencyUS: us(h.Quantile(p))})
	}
	return out
}

// String formats the standard percentiles for humans. One goroutine at a time.
func (h *Histogram) String() string {
	p := h.Percentiles()
	return fmt.Sprintf("n=%d p50=%.1fµs p90=%.1fµs p99=%.1fµs p99.9=%.1fµs p99.99=%.1fµs max=%.1fµs",
		h.Count(), p.P50, p.P90, p.P99, p.P999, p.P9999, p.Max)
}

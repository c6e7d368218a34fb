package sys

import (
	"math"
	"testing"
	"time"
)

func TestCeilUnits(t *testing.T) {
	for _, tc := range []struct {
		d, unit time.Duration
		limit   uint32
		want    uint32
	}{
		{0, time.Microsecond, math.MaxUint32, 0},
		{-time.Second, time.Microsecond, math.MaxUint32, 0},
		{500 * time.Nanosecond, time.Microsecond, math.MaxUint32, 1},
		{1500 * time.Nanosecond, time.Microsecond, math.MaxUint32, 2},
		{70 * time.Microsecond, time.Microsecond, math.MaxUint32, 70},
		{500 * time.Microsecond, time.Millisecond, math.MaxUint32, 1},
		{(math.MaxInt32 + 5) * time.Microsecond, time.Microsecond, math.MaxInt32, math.MaxInt32},
		{math.MaxInt64, time.Microsecond, math.MaxUint32, math.MaxUint32},
	} {
		if got := CeilUnits(tc.d, tc.unit, tc.limit); got != tc.want {
			t.Errorf("CeilUnits(%v, %v, %d) = %d, want %d", tc.d, tc.unit, tc.limit, got, tc.want)
		}
	}
}

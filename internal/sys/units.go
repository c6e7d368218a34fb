package sys

import "time"

// CeilUnits returns d in whole units, rounded up (so that a positive d
// below one unit is 1, not the 0 a kernel reads as "none" or "default"),
// at most limit; 0 for d <= 0. It is how durations become the integer
// fields of the kernel's structs (SQ thread idle ms, busy-poll µs).
func CeilUnits(d, unit time.Duration, limit uint32) uint32 {
	if d <= 0 {
		return 0
	}
	n := d / unit
	if d%unit != 0 {
		n++
	}
	return uint32(min(n, time.Duration(limit)))
}

package resilience

import (
	"math"
	"time"
)

// Backoff returns the wait before retry n (1 = the first retry): initial × factor^(n−1),
// capped at max, then spread by ± jitter (a fraction; rnd returns [0,1)). The result never
// exceeds max.
func Backoff(n int, initial, max time.Duration, factor, jitter float64, rnd func() float64) time.Duration {
	if n < 1 {
		n = 1
	}
	d := float64(initial) * math.Pow(factor, float64(n-1))
	if d > float64(max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(max)
	}
	if jitter > 0 && rnd != nil {
		d += d * jitter * (2*rnd() - 1)
	}
	if d > float64(max) {
		d = float64(max)
	}
	if d < 0 {
		d = 0
	}
	return time.Duration(d)
}

package routing

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"time"
)

// Candidate is what a strategy reads of one target (or, for a provider's own strategy, of one
// connection). The engine fills it from its live tables; Order only reads it.
type Candidate struct {
	// Weight is the target's weight (1–100); anything below 1 counts as 1.
	Weight int
	// InFlight is how many requests run on it now.
	InFlight int
	// ErrorRate is its recent error rate, 0..1.
	ErrorRate float64
	// TTFT is its recent time to first token (an EWMA); 0 = not known yet.
	TTFT time.Duration
	// Uses is how many requests were started on it.
	Uses uint64
	// Headroom is the share of quota left in its tightest usage window, 0..1 (1 for API keys,
	// which have no windows).
	Headroom float64
	// ResetAt is when its earliest usage window resets; zero = none known.
	ResetAt time.Time
	// Saturated: every connection is at its concurrency cap with requests waiting in line.
	Saturated bool
}

// lowHeadroom is the share of quota below which fill-first stops filling a target.
const lowHeadroom = 0.05

// Order returns the order in which to try cands, as indexes into cands (every index once). It
// is pure: no clock, no I/O; the randomised strategies draw only from rnd, so a fixed seed gives
// a fixed order. turn is the request's number in the caller's counter (round-robin rotates by
// it).
//
//   - priority: as listed.
//   - weighted: weighted random without replacement: each next one is drawn from those left
//     with a probability proportional to its Weight.
//   - round-robin: as listed, rotated to start at turn modulo the count, so successive
//     requests start at successive targets.
//   - random: a uniform shuffle.
//   - least-used: fewest Uses first; ties as listed.
//   - p2c (power of two choices): two drawn at random, the one with the lower load score first;
//     then the rest by the same score, ties as listed. The score is (InFlight+1)/(1−ErrorRate)
//     (ErrorRate capped at 0.99): the requests in flight per expected success, so neither a busy
//     healthy target nor an idle failing one (which empties fast because it fails fast) wins
//     by one of the two numbers alone.
//   - fill-first: as listed, except that targets that are Saturated or have less than 5 %
//     Headroom go last (in listed order among themselves).
//   - latency: targets whose TTFT is unknown first (as listed: they are tried to learn it), then
//     the lowest TTFT first; ties as listed.
//   - headroom: most Headroom first; ties by the earliest ResetAt (a window that resets sooner
//     loses less by being used now; no reset known counts as latest), then as listed.
//
// An unknown strategy orders as priority.
func Order(strategy Strategy, cands []Candidate, turn uint64, rnd *rand.Rand) []int {
	n := len(cands)
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	if n <= 1 {
		return out
	}
	switch strategy {
	case Weighted:
		weighted(out, cands, rnd)
	case RoundRobin:
		off := int(turn % uint64(n))
		slices.Reverse(out[:off])
		slices.Reverse(out[off:])
		slices.Reverse(out)
	case Random:
		rnd.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	case LeastUsed:
		slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(cands[a].Uses, cands[b].Uses) })
	case P2C:
		p2c(out, cands, rnd)
	case FillFirst:
		slices.SortStableFunc(out, func(a, b int) int { return cmpBool(full(cands[a]), full(cands[b])) })
	case Latency:
		slices.SortStableFunc(out, func(a, b int) int {
			ta, tb := cands[a].TTFT, cands[b].TTFT
			switch {
			case ta <= 0 && tb <= 0:
				return 0
			case ta <= 0:
				return -1
			case tb <= 0:
				return 1
			}
			return cmpDur(ta, tb)
		})
	case Headroom:
		slices.SortStableFunc(out, func(a, b int) int {
			if c := cmpF64(cands[b].Headroom, cands[a].Headroom); c != 0 {
				return c
			}
			return cmpReset(cands[a].ResetAt, cands[b].ResetAt)
		})
	}
	return out
}

// weighted draws out's order by weight without replacement.
func weighted(out []int, cands []Candidate, rnd *rand.Rand) {
	total := 0
	for _, c := range cands {
		total += weightOf(c)
	}
	for i := range out {
		pick := rnd.IntN(total)
		j := i
		for ; j < len(out)-1; j++ {
			w := weightOf(cands[out[j]])
			if pick < w {
				break
			}
			pick -= w
		}
		total -= weightOf(cands[out[j]])
		out[i], out[j] = out[j], out[i]
		// Keep the ones left in listed order, so the draw depends only on the seed and weights.
		slices.Sort(out[i+1:])
	}
}

func weightOf(c Candidate) int { return max(c.Weight, 1) }

// p2c puts the better of two random picks first and the rest after it by load score.
func p2c(out []int, cands []Candidate, rnd *rand.Rand) {
	n := len(out)
	a := rnd.IntN(n)
	b := rnd.IntN(n - 1)
	if b >= a {
		b++
	}
	first := a
	if c := cmpF64(load(cands[b]), load(cands[a])); c < 0 || c == 0 && b < a {
		first = b
	}
	rest := make([]int, 0, n-1)
	for _, i := range out {
		if i != first {
			rest = append(rest, i)
		}
	}
	slices.SortStableFunc(rest, func(x, y int) int { return cmpF64(load(cands[x]), load(cands[y])) })
	out[0] = first
	copy(out[1:], rest)
}

// load is p2c's score: requests in flight per expected success.
func load(c Candidate) float64 {
	rate := min(max(c.ErrorRate, 0), 0.99)
	return float64(max(c.InFlight, 0)+1) / (1 - rate)
}

// full reports whether fill-first passes over a target.
func full(c Candidate) bool { return c.Saturated || c.Headroom < lowHeadroom }

func cmpF64(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpDur(a, b time.Duration) int { return cmpF64(float64(a), float64(b)) }

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// cmpReset orders reset times earliest first; zero (none known) last.
func cmpReset(a, b time.Time) int {
	switch {
	case a.IsZero() && b.IsZero():
		return 0
	case a.IsZero():
		return 1
	case b.IsZero():
		return -1
	}
	return a.Compare(b)
}

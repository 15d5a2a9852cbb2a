package proxy

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// What the routing strategies read of a combo's targets (and of a provider's connections): how
// many requests run on each now, how many were started, the recent error rate and the recent
// time to first byte. The numbers live in memory only: after a restart every target starts
// unknown, which the latency strategy treats as "try it to learn it".

// ewmaWeight is how much one new observation moves an average: about the last ten count.
const ewmaWeight = 0.2

// routeStat is one target's (or connection's) numbers.
type routeStat struct {
	inFlight atomic.Int64
	uses     atomic.Uint64

	mu      sync.Mutex
	errRate float64       // EWMA of failures (1) and successes (0)
	ttft    time.Duration // EWMA; 0 = none seen yet
}

// routeStats holds the numbers by key. Keys come from saved combos and connections, so the
// map stays as small as the configuration (a deleted target's few bytes stay until a restart).
type routeStats struct {
	mu sync.RWMutex
	m  map[string]*routeStat
}

func newRouteStats() *routeStats { return &routeStats{m: map[string]*routeStat{}} }

// get returns the numbers of key, created on first use.
func (s *routeStats) get(key string) *routeStat {
	s.mu.RLock()
	st := s.m[key]
	s.mu.RUnlock()
	if st != nil {
		return st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st = s.m[key]; st == nil {
		st = &routeStat{}
		s.m[key] = st
	}
	return st
}

// peek returns the numbers of key without creating them (nil when none).
func (s *routeStats) peek(key string) *routeStat {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m[key]
}

// begin notes a request started on the target; end must follow.
func (st *routeStat) begin() {
	st.inFlight.Add(1)
	st.uses.Add(1)
}

// end notes how the request ended: ok or not, and its time to first byte when an answer began
// (0 when none did).
func (st *routeStat) end(ok bool, ttft time.Duration) {
	st.inFlight.Add(-1)
	st.mu.Lock()
	defer st.mu.Unlock()
	x := 1.0
	if ok {
		x = 0
	}
	st.errRate += ewmaWeight * (x - st.errRate)
	if ttft > 0 {
		if st.ttft == 0 {
			st.ttft = ttft
		} else {
			st.ttft += time.Duration(ewmaWeight * float64(ttft-st.ttft))
		}
	}
}

// read returns the numbers a strategy reads.
func (st *routeStat) read() (inFlight int, uses uint64, errRate float64, ttft time.Duration) {
	if st == nil {
		return 0, 0, 0, 0
	}
	st.mu.Lock()
	errRate, ttft = st.errRate, st.ttft
	st.mu.Unlock()
	return int(st.inFlight.Load()), st.uses.Load(), errRate, ttft
}

// connStatKey keys a connection's numbers (for its provider's strategy).
func connStatKey(id int64) string { return "c\x00" + strconv.FormatInt(id, 10) }

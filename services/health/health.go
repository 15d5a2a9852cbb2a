// Package health keeps a rolling ten-minute window of request outcomes per provider and model,
// and derives the provider status operators see from it, model discovery and the breaker.
package health

import (
	"sort"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/errs"
)

// Window is the length of the rolling outcome window.
const Window = 10 * time.Minute

// bucketCount buckets of one minute make up the window.
const bucketCount = 10

// maxModels bounds the models tracked per provider; the least recently seen is dropped.
const maxModels = 512

// maxFailures is how many recent failures are kept per provider for the dashboard.
const maxFailures = 5

// Degraded thresholds: a model with at least this many failures in the window, making up at
// least half of its requests, degrades the provider.
const (
	DegradedMinFailures = 3
	DegradedMinShare    = 0.5
)

// Failure is one recent failed request.
type Failure struct {
	At     time.Time
	Model  string
	Status int
	// Message is Msg in English (the admin API); the dashboard translates Msg.
	Message string
	Msg     errs.Msg `json:"-"`
}

type bucket struct {
	minute   int64
	ok, fail int
}

type modelStats struct {
	buckets  [bucketCount]bucket
	lastSeen time.Time
}

type providerStats struct {
	models   map[string]*modelStats
	failures []Failure // newest last
}

// Tracker records outcomes.
type Tracker struct {
	clock clockwork.Clock
	mu    sync.Mutex
	provs map[string]*providerStats
}

// New builds an empty tracker.
func New(clock clockwork.Clock) *Tracker {
	return &Tracker{clock: clock, provs: map[string]*providerStats{}}
}

// Record adds one request outcome.
func (t *Tracker) Record(provider, model string, ok bool, status int, msg errs.Msg) {
	now := t.clock.Now()
	minute := now.Unix() / 60
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.provs[provider]
	if p == nil {
		p = &providerStats{models: map[string]*modelStats{}}
		t.provs[provider] = p
	}
	m := p.models[model]
	if m == nil {
		if len(p.models) >= maxModels {
			evictOldest(p.models)
		}
		m = &modelStats{}
		p.models[model] = m
	}
	m.lastSeen = now
	b := &m.buckets[minute%bucketCount]
	if b.minute != minute {
		*b = bucket{minute: minute}
	}
	if ok {
		b.ok++
		return
	}
	b.fail++
	p.failures = append(p.failures, Failure{At: now, Model: model, Status: status, Message: msg.String(), Msg: msg})
	if len(p.failures) > maxFailures {
		p.failures = p.failures[len(p.failures)-maxFailures:]
	}
}

func evictOldest(models map[string]*modelStats) {
	var oldest string
	var at time.Time
	for name, m := range models {
		if oldest == "" || m.lastSeen.Before(at) {
			oldest, at = name, m.lastSeen
		}
	}
	delete(models, oldest)
}

// Reset forgets a provider's outcomes (e.g. when its breaker closed after probing).
func (t *Tracker) Reset(provider string) {
	t.mu.Lock()
	delete(t.provs, provider)
	t.mu.Unlock()
}

// Counts are the outcomes of one model inside the window.
type Counts struct {
	Model    string
	OK, Fail int
}

// Degraded returns the models that degrade the provider right now, by name.
func (t *Tracker) Degraded(provider string) []Counts {
	now := t.clock.Now()
	minute := now.Unix() / 60
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.provs[provider]
	if p == nil {
		return nil
	}
	var out []Counts
	for name, m := range p.models {
		if now.Sub(m.lastSeen) > Window {
			delete(p.models, name) // idle: nothing of it is left in the window
			continue
		}
		c := Counts{Model: name}
		for _, b := range m.buckets {
			if minute-b.minute < bucketCount {
				c.OK += b.ok
				c.Fail += b.fail
			}
		}
		if c.Fail >= DegradedMinFailures && float64(c.Fail) >= DegradedMinShare*float64(c.OK+c.Fail) {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// RecentFailures returns the provider's last failures inside the window, newest first.
func (t *Tracker) RecentFailures(provider string) []Failure {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.provs[provider]
	if p == nil {
		return nil
	}
	var out []Failure
	for i := len(p.failures) - 1; i >= 0; i-- {
		if now.Sub(p.failures[i].At) <= Window {
			out = append(out, p.failures[i])
		}
	}
	return out
}

// Status is a provider's overall state.
type Status string

// Provider statuses, from the worst.
const (
	StatusCircuitOpen Status = "circuit_open"
	StatusRecovering  Status = "recovering"
	StatusOffline     Status = "offline"
	StatusUnhealthy   Status = "unhealthy"
	StatusDegraded    Status = "degraded"
	StatusHealthy     Status = "healthy"
)

// Inputs are the facts a provider status is derived from.
type Inputs struct {
	Breaker          string // "closed", "half_open", "open" ("" = closed)
	EverDiscovered   bool   // a model list was fetched at least once
	DiscoveryFailing bool   // the last model refresh failed
	DegradedModels   int
}

// Derive combines breaker, discovery and the outcome window into one status: an open breaker
// wins, then half-open, then discovery (never discovered: unhealthy; last refresh failed:
// offline), then degraded models, else healthy.
func Derive(in Inputs) Status {
	switch {
	case in.Breaker == "open":
		return StatusCircuitOpen
	case in.Breaker == "half_open":
		return StatusRecovering
	case !in.EverDiscovered:
		return StatusUnhealthy
	case in.DiscoveryFailing:
		return StatusOffline
	case in.DegradedModels > 0:
		return StatusDegraded
	}
	return StatusHealthy
}

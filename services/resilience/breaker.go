package resilience

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/settings"
)

// CircuitState is the state of one circuit breaker.
type CircuitState string

// Circuit states.
const (
	CircuitClosed   CircuitState = "closed"
	CircuitHalfOpen CircuitState = "half_open"
	CircuitOpen     CircuitState = "open"
	// CircuitNone is the from-state of a breaker just created and the to-state of one dropped
	// (idle expiry, eviction, Reset, breaker disabled); a gauge deletes its series on it.
	CircuitNone CircuitState = ""
)

// Gauge is the value of switchyard_circuit_breaker_state: 0 closed, 1 half-open, 2 open
// (CircuitNone reads as 0).
func (s CircuitState) Gauge() float64 {
	switch s {
	case CircuitHalfOpen:
		return 1
	case CircuitOpen:
		return 2
	}
	return 0
}

// Breaker limits and fallbacks.
const (
	// MaxModelBreakers is how many model breakers one provider holds at most.
	MaxModelBreakers = 1024
	// ModelBreakerIdleTTL is how long an unused closed model breaker is kept.
	ModelBreakerIdleTTL = 10 * time.Minute
	// DefaultBreakerTimeout replaces a Timeout ≤ 0.
	DefaultBreakerTimeout = 30 * time.Second
	// probeBusyRetry is the RetryAfter given while a half-open breaker's probe is in flight:
	// its verdict can come at any moment.
	probeBusyRetry = time.Second
)

// BreakerConfig is the effective breaker setting of one provider, passed to every Allow. Build
// it once per settings snapshot and provider (NewBreakerConfig) and reuse it: it is read-only.
type BreakerConfig struct {
	// Enabled turns the breaker on; false allows everything and forgets the provider's state.
	Enabled bool
	// FailureThreshold is the number of consecutive failures that opens the breaker; ≤ 0 means
	// disabled, like Enabled=false.
	FailureThreshold int
	// SuccessThreshold is the number of consecutive successful probes that closes a half-open
	// breaker; < 1 means 1.
	SuccessThreshold int
	// Timeout is how long the breaker stays open before one probe may pass; ≤ 0 means
	// DefaultBreakerTimeout. It is fixed when the breaker opens: a changed timeout applies to
	// the next opening.
	Timeout time.Duration
	// SlowCall counts a call slower than this (Result.Duration) as a failure; 0 = off.
	SlowCall time.Duration
	// FailureOn lists the statuses that count as failures; nil matches none, so only transport
	// errors, local timeouts and slow calls count.
	FailureOn *settings.StatusMatcher
	// ScopeModel keeps one breaker per provider+model instead of one per provider. Requests
	// without a model use the provider breaker. Switching scope leaves the other scope's
	// breakers as they are (idle closed model breakers still expire); Reset clears them.
	ScopeModel bool
}

// NewBreakerConfig compiles the effective settings of one provider (after per-provider
// overrides) into a BreakerConfig.
func NewBreakerConfig(s settings.CircuitBreaker) (BreakerConfig, error) {
	m, err := settings.NewStatusMatcher(s.FailureOnStatuses)
	if err != nil {
		return BreakerConfig{}, fmt.Errorf("circuit breaker failure_on_statuses: %w", err)
	}
	var scopeModel bool
	switch s.Scope {
	case "", "provider":
	case "model":
		scopeModel = true
	default:
		return BreakerConfig{}, fmt.Errorf("circuit breaker scope %q: use \"provider\" or \"model\"", s.Scope)
	}
	return BreakerConfig{
		Enabled:          s.Enabled,
		FailureThreshold: s.FailureThreshold,
		SuccessThreshold: s.SuccessThreshold,
		Timeout:          time.Duration(s.TimeoutMS) * time.Millisecond,
		SlowCall:         time.Duration(s.SlowCallThresholdMS) * time.Millisecond,
		FailureOn:        m,
		ScopeModel:       scopeModel,
	}, nil
}

func (c *BreakerConfig) active() bool { return c.Enabled && c.FailureThreshold > 0 }

func (c *BreakerConfig) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultBreakerTimeout
	}
	return c.Timeout
}

func (c *BreakerConfig) successThreshold() int { return max(c.SuccessThreshold, 1) }

// Result is the outcome of one logical request (an exhausted retry sequence is one result).
// The zero Result is neutral: Done(Result{}) releases a ticket without a verdict.
type Result struct {
	// Status is the final upstream status; 0 = no answer.
	Status int
	// Transport is set when no answer arrived (connection refused, reset, TLS, upstream
	// timeout as seen by the transport). Always a failure.
	Transport bool
	// LocalTimeout is set when our own deadline for the call ran out. Always a failure.
	LocalTimeout bool
	// ClientAbort is set when the client went away; never a failure, always neutral.
	ClientAbort bool
	// Duration is the whole call including retries; for streams, the time to the first data
	// event. Compared with BreakerConfig.SlowCall.
	Duration time.Duration
	// Detail describes a failure for LastFailure (e.g. the classification message); "" derives
	// it from the fields above.
	Detail string
}

type verdict uint8

const (
	verdictNeutral verdict = iota
	verdictSuccess
	verdictFailure
)

// judge decides what a result means to the breaker. A client abort is neutral whatever else
// happened; so is a result without status or error (a local error before anything was sent).
func (c *BreakerConfig) judge(r *Result) verdict {
	switch {
	case r.ClientAbort:
		return verdictNeutral
	case r.Transport, r.LocalTimeout:
		return verdictFailure
	case r.Status <= 0:
		return verdictNeutral
	case c.FailureOn.Match(r.Status):
		return verdictFailure
	case c.SlowCall > 0 && r.Duration > c.SlowCall:
		return verdictFailure
	}
	return verdictSuccess
}

// describe names a failure for LastFailure.
func (c *BreakerConfig) describe(r *Result) string {
	switch {
	case r.Detail != "":
		return r.Detail
	case r.Transport:
		return "transport error"
	case r.LocalTimeout:
		return "local timeout"
	case c.FailureOn.Match(r.Status):
		return "status " + strconv.Itoa(r.Status)
	}
	return "slow call: " + r.Duration.String() + " over " + c.SlowCall.String()
}

// OpenError is the fail-fast answer of Allow: the request must not reach the upstream. It is a
// 503 and eligible for failover to another target.
type OpenError struct {
	Provider string
	// Model is "" for a provider-scope breaker.
	Model string
	// RetryAfter is the time until the next probe may pass (1 s while a probe is in flight).
	RetryAfter time.Duration
	// Saturated is set when the model could not get a breaker because every one of the
	// provider's MaxModelBreakers slots is open, half-open or busy: the request is refused
	// rather than let through unprotected.
	Saturated bool
}

// Error is the message the client reads.
func (e *OpenError) Error() string {
	if e.Saturated {
		return "circuit breaker capacity exhausted - provider " + e.Provider + " temporarily unavailable"
	}
	return "circuit breaker is open - provider " + e.Provider + " temporarily unavailable"
}

// StatusCode is the HTTP status of the answer: 503.
func (e *OpenError) StatusCode() int { return http.StatusServiceUnavailable }

// BreakerKey names one breaker; Model is "" for a provider breaker.
type BreakerKey struct {
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
}

// BreakerState is what is persisted and shown of one breaker.
type BreakerState struct {
	Provider string `json:"provider"`
	// Model is "" for a provider breaker.
	Model string       `json:"model,omitempty"`
	State CircuitState `json:"state"`
	// OpenedAt is when the breaker last opened (a failed probe reopens it); zero when closed.
	OpenedAt time.Time `json:"opened_at,omitzero"`
	// NextProbeAt is when an open breaker lets a probe through; zero when closed.
	NextProbeAt time.Time `json:"next_probe_at,omitzero"`
	// ConsecutiveFailures counts failures since the last success.
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`
	// ProbeSuccesses counts successful probes of a half-open breaker (not persisted).
	ProbeSuccesses int       `json:"-"`
	LastFailure    string    `json:"last_failure,omitempty"`
	LastFailureAt  time.Time `json:"last_failure_at,omitzero"`
}

// Empty reports whether the breaker has nothing to remember: closed without failures.
func (s BreakerState) Empty() bool {
	return (s.State == CircuitNone || s.State == CircuitClosed) && s.ConsecutiveFailures == 0
}

// Key is the breaker's key (for a write-behind queue).
func (s BreakerState) Key() BreakerKey { return BreakerKey{Provider: s.Provider, Model: s.Model} }

// Breakers holds every circuit breaker in memory, one group per provider; state changes are
// handed to a persist hook. Transitions are lazy (no goroutines, no timers): an open breaker
// becomes half-open when Allow finds its timeout elapsed.
type Breakers struct {
	clock   clockwork.Clock
	persist func(BreakerState)
	// transitionHooks hear every state change, in the order they were added.
	transitionHooks []func(provider, model string, from, to CircuitState)

	mu     sync.RWMutex
	groups map[string]*breakerGroup // by provider
}

// NewBreakers builds the table; persist (may be nil) receives the state of a breaker after each
// transition and each change of its failure count, in order per breaker. It runs under the
// provider's lock: it must not block (hand it to a write-behind queue) nor call back into
// Breakers.
func NewBreakers(clock clockwork.Clock, persist func(BreakerState)) *Breakers {
	return &Breakers{clock: clock, persist: orDrop(persist), groups: map[string]*breakerGroup{}}
}

// OnTransition adds fn to the hooks called on every state change: from CircuitNone when a
// breaker is created or loaded, to CircuitNone when it is dropped. Every hook added hears every
// transition, in the order they were added. Like persist they run under the provider's lock and
// must be quick. Add them before Load and before the first Allow; the list is not safe to change
// while requests run.
func (m *Breakers) OnTransition(fn func(provider, model string, from, to CircuitState)) {
	if fn != nil {
		m.transitionHooks = append(m.transitionHooks, fn)
	}
}

// onTransition tells every hook of a state change.
func (m *Breakers) onTransition(provider, model string, from, to CircuitState) {
	for _, fn := range m.transitionHooks {
		fn(provider, model, from, to)
	}
}

// breakerGroup is one provider's breakers; its mutex guards them all.
type breakerGroup struct {
	m    *Breakers
	name string

	mu   sync.Mutex
	dead bool     // removed from Breakers (disabled); lookups must start over
	prov *breaker // the provider breaker (and model "" under model scope); nil until used
	// models and the intrusive list head…tail (most to least recently used) hold model breakers.
	models     map[string]*breaker
	head, tail *breaker
}

// breaker is one circuit. gen changes on every transition, probe and drop, so a ticket from an
// earlier phase (or a dropped breaker) cannot touch the current one.
type breaker struct {
	model         string
	state         CircuitState
	gen           uint64
	failures      int
	successes     int
	probing       bool
	inflight      int
	openedAt      time.Time
	nextProbe     time.Time
	lastFailure   string
	lastFailureAt time.Time
	lastUsed      time.Time
	prev, next    *breaker
	listed        bool
}

// Ticket is the admission of one logical request. Call Done exactly once with the outcome (a
// deferred Done(Result{}) as neutral release is safe: later calls on the same Ticket are
// ignored). Done uses a pointer receiver: keep the ticket in one variable, copies do not share
// the done flag. The zero Ticket (breaker disabled) does nothing.
type Ticket struct {
	g     *breakerGroup
	b     *breaker
	cfg   BreakerConfig
	gen   uint64
	probe bool
	done  bool
}

// Probe reports whether this request is the half-open probe: make a single attempt without
// retries.
func (t *Ticket) Probe() bool { return t != nil && t.probe }

// Allow admits a request to provider (and model, under model scope) or refuses it with an
// OpenError. A nil *OpenError means go ahead (do not assign it to an error variable before the
// nil check). Disabled configs always allow and drop any state the provider had.
func (m *Breakers) Allow(provider, model string, cfg BreakerConfig) (Ticket, *OpenError) {
	if !cfg.active() {
		m.forget(provider)
		return Ticket{}, nil
	}
	if !cfg.ScopeModel {
		model = ""
	}
	for {
		g := m.group(provider, true)
		g.mu.Lock()
		if g.dead {
			g.mu.Unlock()
			continue
		}
		t, oe := g.allow(model, &cfg)
		g.mu.Unlock()
		return t, oe
	}
}

// Peek reports whether Allow would refuse a request to provider (and model) now, and for how
// long, without admitting one: no probe slot is taken and no breaker is created. A combo uses it
// to pass over a target whose breaker is open before it builds a request for it.
func (m *Breakers) Peek(provider, model string, cfg BreakerConfig) (open bool, retryAfter time.Duration) {
	if !cfg.active() {
		return false, 0
	}
	if !cfg.ScopeModel {
		model = ""
	}
	g := m.group(provider, false)
	if g == nil {
		return false, 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.prov
	if model != "" {
		b = g.models[model]
	}
	if b == nil {
		return false, 0
	}
	switch {
	case b.state == CircuitOpen:
		if left := b.nextProbe.Sub(g.m.clock.Now()); left > 0 {
			return true, left
		}
	case b.state == CircuitHalfOpen && b.probing:
		return true, probeBusyRetry
	}
	return false, 0
}

// group returns the provider's group, creating it when create is set.
func (m *Breakers) group(provider string, create bool) *breakerGroup {
	m.mu.RLock()
	g := m.groups[provider]
	m.mu.RUnlock()
	if g != nil || !create {
		return g
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if g = m.groups[provider]; g == nil {
		g = &breakerGroup{m: m, name: provider, models: map[string]*breaker{}}
		m.groups[provider] = g
	}
	return g
}

// forget drops a provider whose breaker is disabled: its state must neither block nor show.
func (m *Breakers) forget(provider string) {
	if m.group(provider, false) == nil {
		return // the common case for a disabled breaker
	}
	m.mu.Lock()
	g := m.groups[provider]
	delete(m.groups, provider)
	m.mu.Unlock()
	if g == nil {
		return
	}
	g.mu.Lock()
	g.dead = true
	g.dropAll()
	g.mu.Unlock()
}

func (g *breakerGroup) allow(model string, cfg *BreakerConfig) (Ticket, *OpenError) {
	var now time.Time
	var b *breaker
	if model == "" {
		if b = g.prov; b == nil {
			b = &breaker{state: CircuitClosed}
			g.prov = b
			g.m.onTransition(g.name, "", CircuitNone, CircuitClosed)
		}
	} else {
		now = g.m.clock.Now()
		if b = g.models[model]; b == nil {
			var oe *OpenError
			if b, oe = g.addModel(model, now); oe != nil {
				return Ticket{}, oe
			}
		}
		g.touch(b, now)
	}
	switch b.state {
	case CircuitClosed:
		b.inflight++
		return Ticket{g: g, b: b, cfg: *cfg, gen: b.gen}, nil
	case CircuitOpen:
		if now.IsZero() {
			now = g.m.clock.Now()
		}
		if now.Before(b.nextProbe) {
			return Ticket{}, &OpenError{Provider: g.name, Model: model, RetryAfter: b.nextProbe.Sub(now)}
		}
		b.successes = 0
		g.transition(b, CircuitHalfOpen)
	}
	// half-open: one probe at a time
	if b.probing {
		return Ticket{}, &OpenError{Provider: g.name, Model: model, RetryAfter: probeBusyRetry}
	}
	b.probing = true
	b.gen++
	b.inflight++
	return Ticket{g: g, b: b, cfg: *cfg, gen: b.gen, probe: true}, nil
}

// Done settles the ticket with the request's outcome; see Result for what counts.
func (t *Ticket) Done(r Result) {
	if t == nil || t.done || t.b == nil {
		return
	}
	t.done = true
	g, b := t.g, t.b
	g.mu.Lock()
	defer g.mu.Unlock()
	b.inflight--
	var now time.Time
	if b.model != "" {
		now = g.m.clock.Now()
		if b.listed {
			g.touch(b, now)
		}
	}
	if b.gen != t.gen || t.probe && !b.probing {
		return // admitted in an earlier phase, or the breaker was dropped
	}
	v := t.cfg.judge(&r)
	if v == verdictSuccess && !t.probe {
		if b.failures > 0 {
			b.failures = 0
			g.m.persist(g.state(b))
		}
		return
	}
	if t.probe {
		b.probing = false // a neutral verdict gives the slot back
	}
	if v == verdictNeutral {
		return
	}
	if now.IsZero() {
		now = g.m.clock.Now()
	}
	if v == verdictSuccess { // a probe
		b.failures = 0
		b.successes++
		if b.successes < t.cfg.successThreshold() {
			return
		}
		b.successes = 0
		b.openedAt, b.nextProbe = time.Time{}, time.Time{}
		g.transition(b, CircuitClosed)
		return
	}
	b.failures++
	b.lastFailure, b.lastFailureAt = t.cfg.describe(&r), now
	if t.probe || b.failures >= t.cfg.FailureThreshold {
		b.successes = 0
		b.openedAt, b.nextProbe = now, now.Add(t.cfg.timeout())
		g.transition(b, CircuitOpen)
		return
	}
	g.m.persist(g.state(b))
}

// transition moves b to a new state, invalidates outstanding tickets and reports it.
func (g *breakerGroup) transition(b *breaker, to CircuitState) {
	from := b.state
	b.state = to
	b.gen++
	g.m.onTransition(g.name, b.model, from, to)
	g.m.persist(g.state(b))
}

func (g *breakerGroup) state(b *breaker) BreakerState {
	return BreakerState{Provider: g.name, Model: b.model, State: b.state, OpenedAt: b.openedAt,
		NextProbeAt: b.nextProbe, ConsecutiveFailures: b.failures, ProbeSuccesses: b.successes,
		LastFailure: b.lastFailure, LastFailureAt: b.lastFailureAt}
}

// drop forgets b: outstanding tickets go stale, a persisted row is deleted, the gauge is told.
func (g *breakerGroup) drop(b *breaker) { g.discard(b, true) }

// discard is drop; without persist the row is left alone.
func (g *breakerGroup) discard(b *breaker, persist bool) {
	if b == g.prov {
		g.prov = nil
	} else {
		g.unlink(b)
		delete(g.models, b.model)
	}
	b.gen++
	if persist && (b.state != CircuitClosed || b.failures > 0) {
		g.m.persist(BreakerState{Provider: g.name, Model: b.model, State: CircuitClosed})
	}
	g.m.onTransition(g.name, b.model, b.state, CircuitNone)
}

func (g *breakerGroup) dropAll() {
	if g.prov != nil {
		g.drop(g.prov)
	}
	for g.tail != nil {
		g.drop(g.tail)
	}
}

// Reset closes one breaker by forgetting it (the operator's reset); model "" is the provider
// breaker.
func (m *Breakers) Reset(provider, model string) {
	g := m.group(provider, false)
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.prov
	if model != "" {
		b = g.models[model]
	}
	if b != nil {
		g.drop(b)
	}
}

// ResetProvider forgets the provider breaker and every model breaker of provider.
func (m *Breakers) ResetProvider(provider string) {
	g := m.group(provider, false)
	if g == nil {
		return
	}
	g.mu.Lock()
	g.dropAll()
	g.mu.Unlock()
}

// Load installs states read at start (before serving). An open or half-open breaker loads as
// open with its stored probe time, so it stays open across a restart and its probe runs when
// due; a closed one keeps its failure count. A state replaces what the breaker held. Each
// change is reported to OnTransition; nothing is persisted.
func (m *Breakers) Load(states []BreakerState) {
	now := m.clock.Now()
	for _, s := range states {
		if s.State != CircuitOpen && s.State != CircuitHalfOpen && s.ConsecutiveFailures <= 0 {
			continue
		}
		g := m.group(s.Provider, true)
		g.mu.Lock()
		g.load(s, now)
		g.mu.Unlock()
	}
}

func (g *breakerGroup) load(s BreakerState, now time.Time) {
	from := CircuitNone
	b := g.prov
	if s.Model != "" {
		b = g.models[s.Model]
	}
	switch {
	case b != nil:
		from = b.state
	case s.Model == "":
		b = &breaker{}
		g.prov = b
	case len(g.models) < MaxModelBreakers || g.evict(false): // Load and Apply persist nothing
		b = &breaker{model: s.Model}
		g.models[s.Model] = b
	default:
		return // every slot is protected
	}
	if s.Model != "" {
		g.touch(b, now)
	}
	b.gen++ // outstanding tickets (if any) belong to the replaced state
	b.state, b.openedAt, b.nextProbe = CircuitClosed, time.Time{}, time.Time{}
	b.failures, b.successes, b.probing = max(s.ConsecutiveFailures, 0), 0, false
	b.lastFailure, b.lastFailureAt = s.LastFailure, s.LastFailureAt
	if s.State == CircuitOpen || s.State == CircuitHalfOpen {
		b.state, b.openedAt, b.nextProbe = CircuitOpen, s.OpenedAt, s.NextProbeAt
		if b.nextProbe.IsZero() {
			b.nextProbe = s.OpenedAt
		}
	}
	if from != b.state {
		g.m.onTransition(g.name, b.model, from, b.state)
	}
}

// Apply installs a breaker's state as another replica recorded it, without persisting it, so a
// breaker opened there fails fast here too:
//
//   - open: the breaker opens here with the same opening and probe time; until then Allow and
//     Peek refuse with the same RetryAfter, then one probe of this replica's own passes, as for
//     a breaker opened here. Each replica probes for itself, so a cluster sends up to one probe
//     per replica.
//   - half-open (the other replica's probe is running): installed as open with its probe time,
//     as Load does, so this replica may probe as well; a breaker already half-open here keeps its
//     own probe.
//   - closed with failures: the failure count of a closed breaker here becomes the recorded one;
//     an open or half-open breaker here stays as it is, since a count never closes a breaker.
//   - closed without failures (the record deleted: a probe succeeded, a success reset the count,
//     an operator reset it, it was dropped): a breaker held here closes with no failures; none
//     is created.
//
// Every change of the visible state is reported to OnTransition, as Load reports it, so this
// replica's logs and metrics show it: a transition made on one replica is counted on each.
// A close arrives as a transition to CircuitClosed (the breaker stays held, closed, until it
// idles out), never as a drop. In-flight tickets of a replaced phase go stale, as they do on a
// local transition.
func (m *Breakers) Apply(s BreakerState) {
	if s.Provider == "" {
		return
	}
	now := m.clock.Now()
	for {
		g := m.group(s.Provider, !s.Empty())
		if g == nil {
			return
		}
		g.mu.Lock()
		if g.dead {
			g.mu.Unlock()
			continue
		}
		g.apply(s, now)
		g.mu.Unlock()
		return
	}
}

func (g *breakerGroup) apply(s BreakerState, now time.Time) {
	b := g.prov
	if s.Model != "" {
		b = g.models[s.Model]
	}
	switch {
	case s.State == CircuitHalfOpen && b != nil && b.state == CircuitHalfOpen:
		// this replica's probe runs; its verdict is as good as the other one's
	case s.State == CircuitOpen || s.State == CircuitHalfOpen:
		g.load(s, now)
	case b == nil:
		if !s.Empty() {
			g.load(s, now)
		}
	case b.state != CircuitClosed:
		if s.Empty() {
			from := b.state
			b.gen++
			b.state, b.openedAt, b.nextProbe = CircuitClosed, time.Time{}, time.Time{}
			b.failures, b.successes, b.probing = 0, 0, false
			g.m.onTransition(g.name, b.model, from, CircuitClosed)
		}
	default:
		b.failures = max(s.ConsecutiveFailures, 0)
		if !s.Empty() {
			b.lastFailure, b.lastFailureAt = s.LastFailure, s.LastFailureAt
		}
	}
}

// States returns every breaker held in memory, by provider and model, after dropping idle
// model breakers.
func (m *Breakers) States() []BreakerState {
	now := m.clock.Now()
	m.mu.RLock()
	groups := make([]*breakerGroup, 0, len(m.groups))
	for _, g := range m.groups {
		groups = append(groups, g)
	}
	m.mu.RUnlock()
	var out []BreakerState
	for _, g := range groups {
		g.mu.Lock()
		g.sweep(now)
		if g.prov != nil {
			out = append(out, g.state(g.prov))
		}
		for b := g.head; b != nil; b = b.next {
			out = append(out, g.state(b))
		}
		g.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Provider != out[j].Provider {
			return out[i].Provider < out[j].Provider
		}
		return out[i].Model < out[j].Model
	})
	return out
}

// Now is the breakers' clock.
func (m *Breakers) Now() time.Time { return m.clock.Now() }

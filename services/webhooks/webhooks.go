// Package webhooks delivers events to operators' HTTP endpoints off the request path: Send
// queues a JSON POST without blocking, and Run, the one goroutine that owns the queue, delivers
// it and retries a failure with backoff.
//
// # What a receiver gets
//
// A POST with the Event as JSON ({"type", "id", "created_at", "data"}) and these headers:
//
//	Content-Type: application/json
//	User-Agent: Switchyard-Webhooks
//	X-Switchyard-Event: <the event's type, e.g. key.budget_threshold>
//	X-Switchyard-Delivery: <an id of this delivery, the same on every retry of it>
//	X-Switchyard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// # Checking the signature
//
// The signature is Stripe's scheme: the HMAC-SHA256, under the shared secret, of the timestamp,
// a dot and the raw body exactly as received (before any JSON parsing), hex-encoded. A receiver
// recomputes it, compares in constant time, and rejects a timestamp more than a few minutes from
// its own clock, so a captured request cannot be replayed later. Every attempt is signed afresh
// with its own time, so a retry an hour later still passes; a receiver that must act once per
// delivery keeps the X-Switchyard-Delivery ids it handled. More than one v1 may appear (a future
// secret rotation); one matching is enough. Verify does all of this.
//
// # Delivery and retries
//
// A 2xx answer delivers. A network error, a timeout (10 s by default), a redirect (never
// followed: the 3xx is a failure, so a POST is never re-sent to wherever an endpoint points),
// 408, 429 and 5xx are retried, up to MaxAttempts attempts in all, after an exponential backoff
// of 1 s doubling to at most 10 min with up to 25 % random jitter added, or after the answer's
// Retry-After (seconds or an HTTP date, at most 1 h) when that is longer. Any other 4xx is final.
// At most one delivery per endpoint is in flight and a few endpoints are served in parallel, so
// a slow endpoint delays only its own deliveries. The queue holds MaxQueue deliveries; beyond
// them, and when Run has ended, a delivery is dropped and logged. Nothing is persisted: a
// restart drops what was pending.
package webhooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Outcomes reported to Options.OnOutcome, one per delivery attempt or dropped delivery.
const (
	// OutcomeDelivered: an attempt got a 2xx; the delivery is done.
	OutcomeDelivered = "delivered"
	// OutcomeRetry: an attempt failed and the delivery will be tried again.
	OutcomeRetry = "retry"
	// OutcomeFailed: the delivery is given up (a final 4xx, the attempts used up, or an event
	// that cannot be sent at all).
	OutcomeFailed = "failed"
	// OutcomeDropped: the delivery was never completed because the queue was full or the
	// sender stopped.
	OutcomeDropped = "dropped"
)

// Defaults of Options.
const (
	DefaultMaxQueue    = 1000
	DefaultMaxAttempts = 8
	DefaultWorkers     = 4
	DefaultTimeout     = 10 * time.Second
)

// Backoff bounds.
const (
	firstBackoff  = time.Second
	maxBackoff    = 10 * time.Minute
	maxRetryAfter = time.Hour
	// bodyDrain is how much of an answer is read (and thrown away) so its connection can be
	// reused; a longer answer costs the connection instead.
	bodyDrain = 64 << 10
)

// Options configures a Sender.
type Options struct {
	Clock clockwork.Clock // nil: the real clock
	Log   *slog.Logger    // nil: slog.Default()
	// Client makes the POSTs; nil: a client of its own. Whichever client, redirects are never
	// followed, and a client without a timeout gets DefaultTimeout.
	Client *http.Client
	// Secret is the signing secret, read at every attempt (so a changed secret applies to
	// retries too). An empty secret fails the delivery: an unsigned POST would be worthless to
	// a receiver that checks, and dangerous to one that does not.
	Secret func() string
	// MaxQueue is how many deliveries may wait or be in flight (default DefaultMaxQueue).
	MaxQueue int
	// MaxAttempts is how many times one delivery is tried in all (default DefaultMaxAttempts).
	MaxAttempts int
	// Workers is how many endpoints are served at once (default DefaultWorkers).
	Workers int
	// OnOutcome, if set, is called with an Outcome… constant for every attempt's result and
	// every dropped delivery (metrics). It may be called with the Sender's lock held: it must
	// not block or call the Sender.
	OnOutcome func(outcome string)
}

// Stats are a Sender's counts since it was made.
type Stats struct {
	// Delivered counts deliveries that got a 2xx.
	Delivered int64
	// FailedAttempts counts attempts that did not deliver (retried or final).
	FailedAttempts int64
	// Failed counts deliveries given up.
	Failed int64
	// Dropped counts deliveries dropped (queue full, or the sender stopped).
	Dropped int64
	// Pending is the deliveries waiting or in flight now.
	Pending int64
}

// Sender delivers events; make it with New, start Run once, and Send from anywhere.
type Sender struct {
	clock       clockwork.Clock
	log         *slog.Logger
	client      *http.Client
	secret      func() string
	maxQueue    int
	maxAttempts int
	workers     int
	onOutcome   func(string)
	// jitter spreads a backoff (tests pin it).
	jitter func(time.Duration) time.Duration

	kick chan struct{}

	mu       sync.Mutex
	waiting  []*delivery         // queued or backing off, in the order they were (re)queued
	busy     map[string]struct{} // endpoints (URLs) with a delivery in flight
	inflight int
	stopped  bool
	stats    Stats
}

// delivery is one event on its way to one URL.
type delivery struct {
	url      string
	endpoint string // scheme://host, what logs name (a URL's path or query may hold a token)
	id       string
	event    string
	eventID  string
	body     []byte
	attempts int
	due      time.Time
}

// New builds a Sender; nothing is delivered until Run runs.
func New(o Options) *Sender {
	s := &Sender{clock: o.Clock, log: o.Log, client: noRedirects(o.Client), secret: o.Secret,
		maxQueue: o.MaxQueue, maxAttempts: o.MaxAttempts, workers: o.Workers, onOutcome: o.OnOutcome,
		jitter: jitter, kick: make(chan struct{}, 1), busy: map[string]struct{}{}}
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.secret == nil {
		s.secret = func() string { return "" }
	}
	if s.maxQueue <= 0 {
		s.maxQueue = DefaultMaxQueue
	}
	if s.maxAttempts <= 0 {
		s.maxAttempts = DefaultMaxAttempts
	}
	if s.workers <= 0 {
		s.workers = DefaultWorkers
	}
	if s.onOutcome == nil {
		s.onOutcome = func(string) {}
	}
	return s
}

// refuseRedirect makes the client hand back a 3xx instead of following it: following would
// re-send the signed event to wherever the endpoint points (an internal address included).
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// noRedirects returns a copy of c that refuses redirects and times out (nil: a client of its
// own, with its own transport, so Run can close its idle connections when it ends). A client
// without a timeout gets DefaultTimeout: an endpoint that never answers would otherwise hold its
// deliveries and a worker for good.
func noRedirects(c *http.Client) *http.Client {
	if c == nil {
		return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: DefaultTimeout,
			CheckRedirect: refuseRedirect}
	}
	out := *c
	out.CheckRedirect = refuseRedirect
	if out.Timeout <= 0 {
		out.Timeout = DefaultTimeout
	}
	return &out
}

// Stats returns the counts so far.
func (s *Sender) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Pending = int64(len(s.waiting) + s.inflight)
	return st
}

// Send queues event for a POST to rawURL and returns at once; it never blocks on I/O. An event
// that cannot be sent (a URL that is not absolute http or https, data that does not marshal)
// fails at once; a full queue, or a sender whose Run has ended, drops it. Both are logged.
func (s *Sender) Send(rawURL string, event Event) {
	endpoint, ok := endpointOf(rawURL)
	if !ok {
		s.giveUp("webhook URL is not an absolute http(s) URL", "event", event.Type)
		return
	}
	if event.ID == "" {
		event.ID = newID("evt_")
	}
	if event.At.IsZero() {
		event.At = s.clock.Now().UTC()
	}
	body, err := json.Marshal(event)
	if err != nil {
		s.giveUp("webhook event does not marshal", "event", event.Type, "endpoint", endpoint, "error", err)
		return
	}
	d := &delivery{url: rawURL, endpoint: endpoint, id: newID("whd_"), event: event.Type, eventID: event.ID,
		body: body, due: s.clock.Now()}
	s.mu.Lock()
	why := ""
	switch {
	case s.stopped:
		why = "sender stopped"
	case len(s.waiting)+s.inflight >= s.maxQueue:
		why = "queue full"
	default:
		s.waiting = append(s.waiting, d)
	}
	if why != "" {
		s.stats.Dropped++
	}
	s.mu.Unlock()
	if why != "" {
		s.log.Warn("webhook delivery dropped", "reason", why, "endpoint", endpoint, "event", d.event,
			"event_id", d.eventID, "max_queue", s.maxQueue)
		s.onOutcome(OutcomeDropped)
		return
	}
	s.wake()
}

// giveUp counts a delivery failed before any attempt and logs why.
func (s *Sender) giveUp(msg string, args ...any) {
	s.mu.Lock()
	s.stats.Failed++
	s.mu.Unlock()
	s.log.Error(msg, args...)
	s.onOutcome(OutcomeFailed)
}

func (s *Sender) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// endpointOf is the scheme and host of an absolute http(s) URL.
func endpointOf(rawURL string) (string, bool) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	return u.Scheme + "://" + u.Host, true
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b[:])
}

// Run delivers until ctx ends, then drops (and logs) what is still pending, cancels the
// attempts in flight and returns once its workers have ended. Call it once.
func (s *Sender) Run(ctx context.Context) {
	work := make(chan *delivery, s.workers) // inflight ≤ workers, so a send never blocks
	var wg sync.WaitGroup
	for range s.workers {
		wg.Go(func() {
			for d := range work {
				s.finish(ctx, d, s.attempt(ctx, d))
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait()
		s.client.CloseIdleConnections()
		s.mu.Lock()
		n := len(s.waiting)
		s.waiting, s.stopped = nil, true
		s.stats.Dropped += int64(n)
		s.mu.Unlock()
		if n > 0 {
			s.log.Warn("webhook deliveries dropped at shutdown", "pending", n)
		}
		for range n {
			s.onOutcome(OutcomeDropped)
		}
	}()
	for {
		ready, wait := s.next()
		for _, d := range ready {
			work <- d
		}
		var timer <-chan time.Time
		var t clockwork.Timer
		if wait > 0 {
			t = s.clock.NewTimer(wait)
			timer = t.Chan()
		}
		select {
		case <-ctx.Done():
		case <-s.kick:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// next takes the deliveries that are due and whose endpoint is free, as many as there are idle
// workers, in queue order; wait is how long until the next one waiting on its backoff is due (0:
// none, or one is due but must wait for a worker or its endpoint, which a kick will announce).
func (s *Sender) next() (ready []*delivery, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	keep := s.waiting[:0]
	for _, d := range s.waiting {
		_, busy := s.busy[d.url]
		switch {
		case busy:
		case d.due.After(now):
			if w := d.due.Sub(now); wait == 0 || w < wait {
				wait = w
			}
		case s.inflight < s.workers:
			s.busy[d.url] = struct{}{}
			s.inflight++
			ready = append(ready, d)
			continue
		}
		keep = append(keep, d)
	}
	clear(s.waiting[len(keep):])
	s.waiting = keep
	return ready, wait
}

// result is how one attempt went.
type result struct {
	outcome    string // OutcomeDelivered, OutcomeRetry or OutcomeFailed
	status     int    // 0: no answer
	err        string // why it failed, for the log
	retryAfter time.Duration
}

// attempt makes one POST.
func (s *Sender) attempt(ctx context.Context, d *delivery) result {
	secret := s.secret()
	if secret == "" {
		return result{outcome: OutcomeFailed, err: "no signing secret is set"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(d.body))
	if err != nil {
		return result{outcome: OutcomeFailed, err: "bad request: " + scrub(err, d.url)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Switchyard-Webhooks")
	req.Header.Set(EventHeader, d.event)
	req.Header.Set(DeliveryHeader, d.id)
	req.Header.Set(SignatureHeader, Sign(secret, s.clock.Now(), d.body))
	resp, err := s.client.Do(req)
	if err != nil {
		return result{outcome: OutcomeRetry, err: scrub(err, d.url)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, bodyDrain))
	_ = resp.Body.Close()
	r := result{status: resp.StatusCode}
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		r.outcome = OutcomeDelivered
	case c >= 300 && c < 400:
		r.outcome, r.err = OutcomeRetry, "redirect not followed"
	case c == http.StatusRequestTimeout, c == http.StatusTooManyRequests, c >= 500:
		r.outcome = OutcomeRetry
	case c >= 400:
		r.outcome = OutcomeFailed
	default: // 1xx: not an answer a POST ends with
		r.outcome = OutcomeRetry
	}
	if r.outcome == OutcomeRetry {
		r.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), s.clock.Now())
	}
	return r
}

// scrub is an error's text without the URL (its path or query may hold a token).
func scrub(err error, rawURL string) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return strings.ReplaceAll(err.Error(), rawURL, "<url>")
}

// finish books an attempt's result: done, or back in the queue until its backoff ends.
func (s *Sender) finish(ctx context.Context, d *delivery, r result) {
	s.mu.Lock()
	delete(s.busy, d.url)
	s.inflight--
	if r.outcome != OutcomeDelivered && ctx.Err() != nil {
		// Cut short by the shutdown: not the endpoint's failure. Run counts it as dropped.
		s.waiting = append(s.waiting, d)
		s.mu.Unlock()
		return
	}
	d.attempts++
	var wait time.Duration
	switch {
	case r.outcome == OutcomeDelivered:
		s.stats.Delivered++
	case r.outcome == OutcomeRetry && d.attempts < s.maxAttempts:
		s.stats.FailedAttempts++
		wait = max(s.jitter(backoff(d.attempts)), r.retryAfter)
		d.due = s.clock.Now().Add(wait)
		s.waiting = append(s.waiting, d)
	default:
		r.outcome = OutcomeFailed
		s.stats.FailedAttempts++
		s.stats.Failed++
	}
	// Reported under the lock, so outcomes arrive in the order they happened, even when the
	// delivery, back in the queue, is tried again at once.
	s.onOutcome(r.outcome)
	args := []any{"endpoint", d.endpoint, "event", d.event, "event_id", d.eventID, "delivery", d.id,
		"attempt", d.attempts}
	s.mu.Unlock()
	s.wake()
	if r.status != 0 {
		args = append(args, "status", r.status)
	}
	if r.err != "" {
		args = append(args, "error", r.err)
	}
	switch r.outcome {
	case OutcomeDelivered:
		s.log.Debug("webhook delivered", args...)
	case OutcomeRetry:
		s.log.Warn("webhook delivery failed, will retry", append(args, "retry_in", wait.String())...)
	default:
		s.log.Error("webhook delivery failed, given up", append(args, "max_attempts", s.maxAttempts)...)
	}
}

// backoff is the wait after the n-th failed attempt (n ≥ 1), before jitter: 1 s doubling,
// at most maxBackoff.
func backoff(n int) time.Duration {
	if n > 20 { // 2^20 s is far past the cap; keeps the shift from overflowing
		return maxBackoff
	}
	return min(firstBackoff<<(n-1), maxBackoff)
}

// jitter adds up to 25 % to d at random, so endpoints that failed together do not all retry in
// the same instant.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(mrand.Int64N(int64(d)/4+1))
}

// parseRetryAfter reads a Retry-After value, seconds or an HTTP date, as a wait from now, at most
// maxRetryAfter (0: absent, unreadable or already past).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

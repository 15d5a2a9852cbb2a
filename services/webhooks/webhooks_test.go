package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"switchyard/services/servicetest"
)

const secret = "whsec_test"

// t0 is a whole second, so HTTP dates (second resolution) land exactly on the fake clock.
var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// hit is one POST a receiver got.
type hit struct {
	header http.Header
	body   []byte
	at     time.Time // the fake clock's now when it arrived
}

// receiver is an endpoint that answers each POST with answer(n) (n counts from 1) and hands
// every request over on hits.
type receiver struct {
	*httptest.Server
	hits chan hit
	n    atomic.Int64
}

func newReceiver(t *testing.T, clock clockwork.Clock, answer func(n int64, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{hits: make(chan hit, 100)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.hits <- hit{header: r.Header.Clone(), body: body, at: clock.Now()}
		n := rc.n.Add(1)
		if answer == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		answer(n, w, r)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// next waits for the receiver's next POST.
func (rc *receiver) next(t *testing.T) hit {
	t.Helper()
	select {
	case h := <-rc.hits:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a POST")
		return hit{}
	}
}

// none asserts the receiver got no further POST so far.
func (rc *receiver) none(t *testing.T, when string) {
	t.Helper()
	select {
	case h := <-rc.hits:
		t.Fatalf("%s: unexpected POST at %v", when, h.at.Sub(t0))
	default:
	}
}

func status(code int, header ...string) func(int64, http.ResponseWriter, *http.Request) {
	return func(_ int64, w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
	}
}

// outcomes records what OnOutcome reported.
type outcomes struct {
	mu   sync.Mutex
	list []string
}

func (o *outcomes) add(s string) { o.mu.Lock(); o.list = append(o.list, s); o.mu.Unlock() }
func (o *outcomes) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.list)
}

// harness is a Sender on a fake clock without jitter; Run starts with run.
type harness struct {
	s     *Sender
	clock *clockwork.FakeClock
	out   *outcomes
	logs  *bytes.Buffer
	logMu *sync.Mutex
}

// newHarness checks for leaked goroutines at the very end of the test (its cleanup is
// registered first, so it runs last, after Run and the receivers are stopped).
func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreCurrent()) })
	h := &harness{clock: clockwork.NewFakeClockAt(t0), out: &outcomes{}, logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	o.Clock = h.clock
	if o.Secret == nil {
		o.Secret = func() string { return secret }
	}
	o.OnOutcome = h.out.add
	o.Log = slog.New(slog.NewTextHandler(lockedWriter{h.logMu, h.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.s = New(o)
	h.s.jitter = func(d time.Duration) time.Duration { return d }
	return h
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (h *harness) log() string {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return h.logs.String()
}

// logged waits until the log has a line containing text (a line is written just after the
// counts it explains are booked).
func (h *harness) logged(t *testing.T, text string) {
	t.Helper()
	if !servicetest.Eventually(func() bool { return strings.Contains(h.log(), text) }) {
		t.Fatalf("the log never said %q: %s", text, h.log())
	}
}

// run starts Run; the returned stop cancels it and waits until it has returned (also at cleanup).
func (h *harness) run(t *testing.T) (stop func()) {
	t.Helper()
	_, stop = servicetest.Start(t, h.s.Run)
	return stop
}

// timerSet waits until Run waits on a backoff timer (the fake clock's only waiter).
func (h *harness) timerSet(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("Run never waited on a backoff timer")
	}
}

// notBefore advances the clock to just short of d, checks the retry has not come, and then
// advances the rest: the retry must come exactly after d.
func (h *harness) notBefore(t *testing.T, rc *receiver, d time.Duration) {
	t.Helper()
	h.timerSet(t)
	h.clock.Advance(d - time.Millisecond)
	// Had the timer fired, the retry would have been made before Run waited on a timer again.
	h.timerSet(t)
	rc.none(t, "before "+d.String())
	h.clock.Advance(time.Millisecond)
}

func (h *harness) stats(t *testing.T, what string, cond func(Stats) bool) Stats {
	t.Helper()
	var st Stats
	servicetest.WaitUntil(t, what, func() bool { st = h.s.Stats(); return cond(st) })
	return st
}

func budgetEvent() Event {
	return NewBudgetEvent(BudgetCrossed{KeyID: 7, KeyName: "agent", Budget: BudgetDaily, Threshold: 80,
		SpendUSD: 4.1, BudgetUSD: 5, PeriodStart: t0.Truncate(24 * time.Hour),
		ResetsAt: t0.Truncate(24 * time.Hour).Add(24 * time.Hour), TimeZone: "UTC"})
}

// A delivery carries the event as JSON with the documented headers, and its signature verifies
// with the shared secret.
func TestDeliveryIsSignedJSON(t *testing.T) {
	h := newHarness(t, Options{})
	rc := newReceiver(t, h.clock, nil)
	h.run(t)
	h.s.Send(rc.URL+"/hooks/budget?token=abc", budgetEvent())
	got := rc.next(t)

	for name, want := range map[string]string{"Content-Type": "application/json", "User-Agent": "Switchyard-Webhooks",
		"X-Switchyard-Event": "key.budget_threshold"} {
		if v := got.header.Get(name); v != want {
			t.Errorf("%s = %q, want %q", name, v, want)
		}
	}
	if id := got.header.Get("X-Switchyard-Delivery"); !strings.HasPrefix(id, "whd_") || len(id) < 20 {
		t.Errorf("X-Switchyard-Delivery = %q", id)
	}
	if err := Verify(secret, got.header.Get("X-Switchyard-Signature"), got.body, t0, 5*time.Minute); err != nil {
		t.Errorf("signature does not verify: %v (%s)", err, got.header.Get("X-Switchyard-Signature"))
	}
	var ev struct {
		Type      string          `json:"type"`
		ID        string          `json:"id"`
		CreatedAt time.Time       `json:"created_at"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(got.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != TypeBudgetThreshold || !strings.HasPrefix(ev.ID, "evt_") || !ev.CreatedAt.Equal(t0) {
		t.Errorf("envelope = %+v", ev)
	}
	var data map[string]any
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"key_id": 7.0, "key_name": "agent", "budget": "daily", "threshold_percent": 80.0,
		"spend_usd": 4.1, "budget_usd": 5.0, "period_start": "2026-03-01T00:00:00Z",
		"resets_at": "2026-03-02T00:00:00Z", "time_zone": "UTC"}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("data.%s = %v, want %v", k, data[k], v)
		}
	}
	if len(data) != len(want) {
		t.Errorf("data has %d fields, want %d: %v", len(data), len(want), data)
	}
	st := h.stats(t, "delivered", func(s Stats) bool { return s.Delivered == 1 })
	if st != (Stats{Delivered: 1}) {
		t.Errorf("stats = %+v", st)
	}
	if o := h.out.get(); !slices.Equal(o, []string{OutcomeDelivered}) {
		t.Errorf("outcomes = %v", o)
	}
	if l := h.log(); strings.Contains(l, "token=abc") || strings.Contains(l, "/hooks/budget") {
		t.Errorf("the log shows the URL's path or query: %s", l)
	}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"type":"key.budget_threshold"}`)
	good := Sign(secret, t0, body)
	tol := 5 * time.Minute
	cases := []struct {
		name   string
		secret string
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		{"good", secret, good, body, t0, nil},
		{"within tolerance", secret, good, body, t0.Add(tol), nil},
		{"tampered body", secret, good, []byte(`{"type":"key.budget_threshold" }`), t0, ErrBadSignature},
		{"wrong secret", "other", good, body, t0, ErrBadSignature},
		{"old timestamp", secret, good, body, t0.Add(tol + time.Second), ErrTimestamp},
		{"timestamp from the future", secret, good, body, t0.Add(-tol - time.Second), ErrTimestamp},
		{"timestamp changed", secret, strings.Replace(good, "t=", "t=1", 1), body, t0, ErrBadSignature},
		{"one of two signatures matches", secret, good + ",v1=" + strings.Repeat("ab", 32), body, t0, nil},
		{"spaces", secret, strings.ReplaceAll(good, ",", ", "), body, t0, nil},
		{"empty", secret, "", body, t0, ErrNoSignature},
		{"no v1", secret, strings.Split(good, ",")[0], body, t0, ErrNoSignature},
		{"no t", secret, strings.Split(good, ",")[1], body, t0, ErrNoSignature},
		{"two t", secret, "t=1," + good, body, t0, ErrNoSignature},
		{"v1 not hex", secret, strings.Split(good, ",")[0] + ",v1=zz", body, t0, ErrNoSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Verify(c.secret, c.header, c.body, c.now, tol); !errors.Is(err, c.want) {
				t.Errorf("Verify = %v, want %v", err, c.want)
			}
		})
	}
	// The documented scheme, spelled out: HMAC-SHA256 over "<t>.<body>", hex.
	if want := "t=1772355600,v1="; !strings.HasPrefix(good, want) || len(good) != len(want)+64 {
		t.Errorf("Sign = %q", good)
	}
}

// A failed attempt is retried after 1 s, then 2 s (jitter aside), with the same delivery id and
// a fresh signature each time, until a 2xx.
func TestRetryWithBackoff(t *testing.T) {
	h := newHarness(t, Options{})
	rc := newReceiver(t, h.clock, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n < 3 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	h.run(t)
	h.s.Send(rc.URL, budgetEvent())
	first := rc.next(t)
	h.notBefore(t, rc, time.Second)
	second := rc.next(t)
	h.notBefore(t, rc, 2*time.Second)
	third := rc.next(t)

	if !second.at.Equal(t0.Add(time.Second)) || !third.at.Equal(t0.Add(3*time.Second)) {
		t.Errorf("attempts at %v, %v; want 1s, 3s", second.at.Sub(t0), third.at.Sub(t0))
	}
	id := first.header.Get(DeliveryHeader)
	for i, got := range []hit{first, second, third} {
		if got.header.Get(DeliveryHeader) != id {
			t.Errorf("attempt %d: delivery id %q, want %q", i+1, got.header.Get(DeliveryHeader), id)
		}
		if !bytes.Equal(got.body, first.body) {
			t.Errorf("attempt %d: body changed", i+1)
		}
		if err := Verify(secret, got.header.Get(SignatureHeader), got.body, got.at, time.Second); err != nil {
			t.Errorf("attempt %d: signature not fresh: %v", i+1, err)
		}
	}
	st := h.stats(t, "delivered", func(s Stats) bool { return s.Delivered == 1 })
	if st != (Stats{Delivered: 1, FailedAttempts: 2}) {
		t.Errorf("stats = %+v", st)
	}
	if o := h.out.get(); !slices.Equal(o, []string{OutcomeRetry, OutcomeRetry, OutcomeDelivered}) {
		t.Errorf("outcomes = %v", o)
	}
}

// Retry-After, in seconds or as an HTTP date, is waited for when it is longer than the backoff,
// and at most an hour.
func TestRetryAfter(t *testing.T) {
	h := newHarness(t, Options{})
	rc := newReceiver(t, h.clock, func(n int64, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.Header().Set("Retry-After", h.clock.Now().Add(300*time.Second).Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
		case 3:
			w.Header().Set("Retry-After", "86400")
			w.WriteHeader(http.StatusTooManyRequests)
		case 4:
			w.Header().Set("Retry-After", "0") // shorter than the backoff (8 s): the backoff wins
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	h.run(t)
	h.s.Send(rc.URL, budgetEvent())
	rc.next(t)
	h.notBefore(t, rc, 120*time.Second)
	rc.next(t)
	h.notBefore(t, rc, 300*time.Second)
	rc.next(t)
	h.notBefore(t, rc, time.Hour)
	rc.next(t)
	h.notBefore(t, rc, 8*time.Second)
	last := rc.next(t)
	if want := t0.Add(120*time.Second + 300*time.Second + time.Hour + 8*time.Second); !last.at.Equal(want) {
		t.Errorf("last attempt at %v, want %v", last.at.Sub(t0), want.Sub(t0))
	}
	h.stats(t, "delivered", func(s Stats) bool { return s.Delivered == 1 })
}

// Which answers are retried and which are final.
func TestStatusClasses(t *testing.T) {
	cases := []struct {
		status int
		retry  bool
	}{
		{200, false}, {201, false}, {204, false},
		{301, true}, {302, true}, {307, true}, {308, true},
		{400, false}, {401, false}, {403, false}, {404, false}, {410, false}, {422, false},
		{408, true}, {429, true}, {500, true}, {502, true}, {503, true}, {504, true},
	}
	for _, c := range cases {
		t.Run(http.StatusText(c.status), func(t *testing.T) {
			h := newHarness(t, Options{})
			rc := newReceiver(t, h.clock, status(c.status, "Location", "/elsewhere"))
			h.run(t)
			h.s.Send(rc.URL, budgetEvent())
			rc.next(t)
			st := h.stats(t, "the attempt is booked", func(s Stats) bool { return s.Delivered+s.FailedAttempts == 1 })
			want := Stats{Delivered: 1}
			switch {
			case c.retry:
				want = Stats{FailedAttempts: 1, Pending: 1}
			case c.status >= 300:
				want = Stats{FailedAttempts: 1, Failed: 1}
			}
			if st != want {
				t.Errorf("stats = %+v, want %+v", st, want)
			}
		})
	}
}

// After MaxAttempts failed attempts the delivery is given up and logged.
func TestGivesUpAfterMaxAttempts(t *testing.T) {
	h := newHarness(t, Options{MaxAttempts: 3})
	rc := newReceiver(t, h.clock, status(http.StatusBadGateway))
	h.run(t)
	h.s.Send(rc.URL, budgetEvent())
	rc.next(t)
	h.notBefore(t, rc, time.Second)
	rc.next(t)
	h.notBefore(t, rc, 2*time.Second)
	rc.next(t)
	st := h.stats(t, "given up", func(s Stats) bool { return s.Failed == 1 })
	if st != (Stats{FailedAttempts: 3, Failed: 1}) {
		t.Errorf("stats = %+v", st)
	}
	if o := h.out.get(); !slices.Equal(o, []string{OutcomeRetry, OutcomeRetry, OutcomeFailed}) {
		t.Errorf("outcomes = %v", o)
	}
	h.logged(t, "webhook delivery failed, given up")
}

// A redirect is a failed attempt: its target is never contacted, whether the sender made its
// own client or was handed one that follows redirects.
func TestRedirectNotFollowed(t *testing.T) {
	for _, own := range []bool{true, false} {
		name := map[bool]string{true: "own client", false: "given client"}[own]
		t.Run(name, func(t *testing.T) {
			o := Options{MaxAttempts: 2}
			if !own {
				o.Client = &http.Client{Transport: &http.Transport{}}
			}
			h := newHarness(t, o)
			var contacted atomic.Int64
			target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { contacted.Add(1) }))
			t.Cleanup(target.Close)
			rc := newReceiver(t, h.clock, status(http.StatusTemporaryRedirect, "Location", target.URL+"/steal"))
			h.run(t)
			h.s.Send(rc.URL, budgetEvent())
			rc.next(t)
			h.notBefore(t, rc, time.Second)
			rc.next(t)
			st := h.stats(t, "given up", func(s Stats) bool { return s.Failed == 1 })
			if st != (Stats{FailedAttempts: 2, Failed: 1}) {
				t.Errorf("stats = %+v", st)
			}
			if n := contacted.Load(); n != 0 {
				t.Errorf("the redirect's target got %d requests", n)
			}
			h.logged(t, "redirect not followed")
		})
	}
}

// The sender's client refuses redirects and has a timeout, whoever made it; a given client
// keeps its own timeout and transport.
func TestClient(t *testing.T) {
	own := New(Options{}).client
	if own.Timeout != DefaultTimeout || own.CheckRedirect == nil || own.Transport == nil ||
		own.Transport == http.DefaultTransport {
		t.Errorf("own client: timeout %v, redirect check %v, transport shared %v", own.Timeout,
			own.CheckRedirect != nil, own.Transport == http.DefaultTransport)
	}
	given := &http.Client{}
	if c := New(Options{Client: given}).client; c.Timeout != DefaultTimeout || c.CheckRedirect == nil || given.CheckRedirect != nil {
		t.Errorf("given client without a timeout: timeout %v, redirect check %v; the caller's changed: %v",
			c.Timeout, c.CheckRedirect != nil, given.CheckRedirect != nil)
	}
	tr := &http.Transport{}
	if c := New(Options{Client: &http.Client{Timeout: time.Second, Transport: tr}}).client; c.Timeout != time.Second || c.Transport != tr {
		t.Errorf("given client: timeout %v, own transport kept %v", c.Timeout, c.Transport == tr)
	}
}

// A network error and a timeout are retried.
func TestNetworkErrorAndTimeoutRetried(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		h := newHarness(t, Options{})
		dead := httptest.NewServer(http.NotFoundHandler())
		url := dead.URL
		dead.Close()
		h.run(t)
		h.s.Send(url, budgetEvent())
		st := h.stats(t, "an attempt failed", func(s Stats) bool { return s.FailedAttempts == 1 })
		if st != (Stats{FailedAttempts: 1, Pending: 1}) {
			t.Errorf("stats = %+v", st)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		h := newHarness(t, Options{Client: &http.Client{Transport: &http.Transport{}, Timeout: 50 * time.Millisecond}})
		rc := newReceiver(t, h.clock, func(_ int64, _ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		h.run(t)
		h.s.Send(rc.URL, budgetEvent())
		rc.next(t)
		st := h.stats(t, "the attempt timed out", func(s Stats) bool { return s.FailedAttempts == 1 })
		if st != (Stats{FailedAttempts: 1, Pending: 1}) {
			t.Errorf("stats = %+v", st)
		}
		h.notBefore(t, rc, time.Second)
		rc.next(t)
	})
}

// Beyond MaxQueue pending deliveries a new one is dropped, counted and logged; the queued ones
// still go out.
func TestQueueOverflowDrops(t *testing.T) {
	h := newHarness(t, Options{MaxQueue: 2})
	rc := newReceiver(t, h.clock, nil)
	for range 3 {
		h.s.Send(rc.URL, budgetEvent()) // never blocks, Run or not
	}
	if st := h.s.Stats(); st != (Stats{Dropped: 1, Pending: 2}) {
		t.Errorf("stats = %+v", st)
	}
	if o := h.out.get(); !slices.Equal(o, []string{OutcomeDropped}) {
		t.Errorf("outcomes = %v", o)
	}
	if l := h.log(); !strings.Contains(l, "webhook delivery dropped") || !strings.Contains(l, "queue full") {
		t.Errorf("the drop is not logged: %s", l)
	}
	h.run(t)
	rc.next(t)
	rc.next(t)
	st := h.stats(t, "both delivered", func(s Stats) bool { return s.Delivered == 2 })
	if st != (Stats{Delivered: 2, Dropped: 1}) {
		t.Errorf("stats = %+v", st)
	}
	rc.none(t, "after the queue drained")
}

// An endpoint that hangs with many deliveries queued holds one worker only: another endpoint's
// delivery goes out meanwhile.
func TestSlowEndpointDoesNotDelayOthers(t *testing.T) {
	h := newHarness(t, Options{})
	release := make(chan struct{})
	var inFlight, most atomic.Int64
	slow := newReceiver(t, h.clock, func(_ int64, _ http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	fast := newReceiver(t, h.clock, nil)
	h.run(t)
	for range 10 {
		h.s.Send(slow.URL, budgetEvent())
	}
	slow.next(t)
	h.s.Send(fast.URL, budgetEvent())
	fast.next(t)
	h.stats(t, "the fast one delivered", func(s Stats) bool { return s.Delivered == 1 })
	if st := h.s.Stats(); st.Pending != 10 {
		t.Errorf("pending = %d, want the slow endpoint's 10", st.Pending)
	}
	close(release)
	h.stats(t, "all delivered", func(s Stats) bool { return s.Delivered == 11 })
	if m := most.Load(); m != 1 {
		t.Errorf("the slow endpoint had %d deliveries in flight at once, want 1", m)
	}
}

// When its context ends Run returns at once: the attempt in flight is cancelled, it and the one
// backing off are dropped and counted, the count is logged, a later Send is dropped, and every
// goroutine has ended (goleak, at cleanup).
func TestRunEndsCleanly(t *testing.T) {
	h := newHarness(t, Options{})
	hanging := newReceiver(t, h.clock, func(_ int64, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	failing := newReceiver(t, h.clock, status(http.StatusInternalServerError))
	stop := h.run(t)
	h.s.Send(failing.URL, budgetEvent())
	failing.next(t)
	h.timerSet(t)
	h.s.Send(hanging.URL, budgetEvent())
	hanging.next(t)
	stop()
	if st := h.s.Stats(); st != (Stats{FailedAttempts: 1, Dropped: 2}) {
		t.Errorf("stats = %+v", st)
	}
	if l := h.log(); !strings.Contains(l, "webhook deliveries dropped at shutdown") || !strings.Contains(l, "pending=2") {
		t.Errorf("the shutdown drop is not logged with its count: %s", l)
	}
	h.s.Send(failing.URL, budgetEvent())
	if st := h.s.Stats(); st.Dropped != 3 || st.Pending != 0 {
		t.Errorf("a Send after Run: stats = %+v", st)
	}
	if o := h.out.get(); !slices.Equal(o, []string{OutcomeRetry, OutcomeDropped, OutcomeDropped, OutcomeDropped}) {
		t.Errorf("outcomes = %v", o)
	}
}

// An event that cannot be delivered fails at once, without a request: no secret, a URL that is
// not http(s), data that does not marshal.
func TestUndeliverable(t *testing.T) {
	cases := []struct {
		name   string
		secret string
		url    func(rc *receiver) string
		event  Event
		log    string
	}{
		{"no secret", "", func(rc *receiver) string { return rc.URL }, budgetEvent(), "no signing secret"},
		{"relative URL", secret, func(*receiver) string { return "/hooks" }, budgetEvent(), "not an absolute http(s) URL"},
		{"file URL", secret, func(*receiver) string { return "file:///etc/passwd" }, budgetEvent(), "not an absolute http(s) URL"},
		{"data does not marshal", secret, func(rc *receiver) string { return rc.URL },
			Event{Type: "x", Data: func() {}}, "does not marshal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Options{Secret: func() string { return c.secret }})
			rc := newReceiver(t, h.clock, nil)
			h.run(t)
			h.s.Send(c.url(rc), c.event)
			st := h.stats(t, "given up", func(s Stats) bool { return s.Failed == 1 })
			if st.Delivered != 0 || st.Pending != 0 || st.Dropped != 0 {
				t.Errorf("stats = %+v", st)
			}
			rc.none(t, c.name)
			h.logged(t, c.log)
		})
	}
}

// The backoff doubles from 1 s to 10 min; the jitter adds at most a quarter.
func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		8: 128 * time.Second, 10: 512 * time.Second, 11: 10 * time.Minute, 64: 10 * time.Minute, 1000: 10 * time.Minute} {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
	spread := false
	for range 1000 {
		j := jitter(time.Second)
		if j < time.Second || j > 1250*time.Millisecond {
			t.Fatalf("jitter(1s) = %v", j)
		}
		spread = spread || j != jitter(time.Second)
	}
	if !spread {
		t.Error("jitter adds nothing")
	}
}

func TestParseRetryAfter(t *testing.T) {
	for _, c := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"-5", 0}, {"abc", 0}, {"30", 30 * time.Second}, {" 30 ", 30 * time.Second},
		{"3601", time.Hour}, {"99999999999999999999", 0},
		{t0.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{t0.Add(-time.Minute).Format(http.TimeFormat), 0},
		{t0.Add(48 * time.Hour).Format(http.TimeFormat), time.Hour},
	} {
		if got := parseRetryAfter(c.v, t0); got != c.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}

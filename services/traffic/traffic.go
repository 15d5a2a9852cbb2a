// Package traffic keeps what client requests did: the request log (one row per finished request,
// with its attempt chain and the connections left out) and per-minute aggregates (requests,
// errors by class, latency and time-to-first-token percentiles, tokens) per provider and client
// key for the dashboard's charts. The request path only hands an entry over (never blocking);
// one background runner writes batches to SQLite, prunes by the retention, and the aggregates
// are loaded again at start so the charts survive a restart. Bodies are kept only when
// Options.BodyBytes is set: the runner truncates and redacts them before they are written.
package traffic

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
	"switchyard/services/errs"
	"switchyard/services/redact"
)

// Entry is one finished client request: never a header or a credential, and a body only as
// the log keeps it (truncated and redacted, when Options.BodyBytes is set).
type Entry struct {
	ID           int64
	RequestID    string
	At           time.Time
	ClientKeyID  int64 // 0 when no key authenticated
	Surface      string
	Model        string
	Provider     string
	ConnectionID int64
	Connection   string
	Status       int
	ErrorCode    string
	// Error is what the client was told when the request failed (its key is "" otherwise).
	Error        errs.Msg
	Attempts     int
	Retries      int
	Failovers    int
	Latency      time.Duration
	TTFT         time.Duration
	Stream       bool
	Complete     bool
	InputTokens  int64
	OutputTokens int64
	// CacheReadTokens and CacheWriteTokens are parts of InputTokens, ReasoningTokens of
	// OutputTokens. CostUSD is what the tokens cost when Priced (a price was known; a
	// subscription account's request is priced at 0).
	CacheReadTokens  int64
	CacheWriteTokens int64
	ReasoningTokens  int64
	CostUSD          float64
	Priced           bool
	Chain            []Attempt
	Skipped          []Skip
	// Combo is the combo the client named ("" for none); Route is its decision trace.
	Combo string
	Route []RouteStep
	// Dropped names the request's fields and tools a translation could not carry toward the
	// upstream's format ("logprobs", "tools.web_search"); nil when nothing was dropped. The log
	// keeps at most maxDropped names of at most maxDroppedName bytes each, redacted.
	Dropped []string
	// Capture is the bodies' start as the edge took it (only when the log keeps bodies); the
	// runner turns it into RequestBody and ResponseBody.
	Capture *Capture
	// RequestBody and ResponseBody are the bodies as kept; a read fills them in (Get only).
	RequestBody  Body
	ResponseBody Body
	// CountOnly marks a request refused before any client key authenticated: it is counted in
	// the aggregates (the charts show it) but never becomes a request-log row, so anonymous
	// callers cannot rotate the log's rows out.
	CountOnly bool
}

// Attempt is one upstream call of a request.
type Attempt struct {
	ConnectionID int64         `json:"connection_id"`
	Connection   string        `json:"connection"`
	Kind         string        `json:"kind"` // first, retry or failover
	Status       int           `json:"status"`
	Reason       string        `json:"reason,omitempty"`
	Duration     time.Duration `json:"duration"`
	// Detail says more where the reason needs it: a redirect's target (scrubbed).
	Detail string `json:"detail,omitempty"`
	// Target is the combo target the call was made for ("" for a plain request).
	Target string `json:"target,omitempty"`
}

// RouteStep is one target a combo considered for a request, and what became of it.
type RouteStep struct {
	// Target is provider/model (with @connection when pinned to one); Via names the nested
	// combos it was reached through, outermost first, when there are any.
	Target string   `json:"target"`
	Via    []string `json:"via,omitempty"`
	// Round counts the dispatches: 1, then one more after each cooldown wait.
	Round int `json:"round"`
	// Outcome is answered, failed (Reason the failure), skipped (left out before any call:
	// Reason the exclusion, Source what excluded it, Until when it ends; zero = no timer),
	// deferred (passed over as saturated, tried only if nothing else could start) or stopped
	// (its failure ended the combo).
	Outcome  string    `json:"outcome"`
	Reason   string    `json:"reason,omitempty"`
	Source   string    `json:"source,omitempty"`
	Until    time.Time `json:"until,omitzero"`
	Attempts int       `json:"attempts,omitempty"`
	// Action is what the combo did after a failure: skip, cool or stop.
	Action string `json:"action,omitempty"`
}

// Skip is a connection the request left out, and why.
type Skip struct {
	Connection  string `json:"connection"`
	Reason      string `json:"reason"` // connection_cooldown, model_lockout or terminal
	Detail      string `json:"detail,omitempty"`
	Target      string `json:"target,omitempty"`
	SecondsLeft int64  `json:"seconds_left"`
}

// Options configures the service.
type Options struct {
	DB    *db.DB
	Clock clockwork.Clock
	Log   *slog.Logger
	// Redact removes credentials from texts that came from outside (upstream messages, bodies);
	// nil = redact.String, which removes key-shaped strings only.
	Redact func(string) string
	// BodyBytes is how much of each request's and answer's body is kept, redacted; 0 (the
	// default) keeps none, and the edge then captures nothing.
	BodyBytes int
	// Retention is how long request log rows are kept; 0 keeps none (the aggregates are kept
	// either way).
	Retention time.Duration
	// MaxRows bounds the request log; the oldest rows go first. Default 100,000.
	MaxRows int64
	// FlushInterval is how often pending entries are written. Default 1 s.
	FlushInterval time.Duration
	// Buffer is how many entries may wait for the runner; more are dropped (and counted)
	// rather than slowing a request. Default 4,096.
	Buffer int
	// SharedIDs draws request log ids from a counter in the store, in the transaction that
	// writes the rows, instead of counting on from the newest id at start: replicas sharing a
	// database must not hand out the same ids.
	SharedIDs bool
}

// Service is the request log and the traffic aggregates.
type Service struct {
	opt     Options
	dropped atomic.Int64
	// bodies counts the captured body bytes handed over and not yet written (maxPendingBodies).
	bodies atomic.Int64

	// queue holds the entries handed over and not yet taken (at most Options.Buffer). Record
	// appends under qmu and wakes the runner only when takeBatch entries wait; otherwise the
	// runner takes them at its next tick (FlushInterval), and a reader of the aggregates takes
	// them first itself (catchUp). Waking the runner for each request cost a switch to it and
	// back on every request.
	qmu   sync.Mutex
	queue []Entry
	// wake tells the runner that a batch waits; syncs asks it to write everything recorded.
	wake  chan struct{}
	syncs chan chan error

	// tmu guards what taking the queue changes: the ids, the spare slice and the pending
	// entries. The runner takes and flushes; a reader of the aggregates may take too.
	tmu     sync.Mutex
	nextID  int64
	spare   []Entry // the queue's other slice, swapped in when the queue is taken
	pending []Entry

	// Owned by the runner.
	rows      []db.RequestLogRow
	writer    *db.RequestLogWriter // prepared at the first flush that writes rows
	lastPrune time.Time

	mu      sync.Mutex // guards minutes, dirty, usage and usageDelta
	minutes map[int64]map[dim]*cell
	dirty   map[cellKey]struct{}
	// usage are the newest usage buckets (usageKeep of them), the ones changed since the last
	// flush: usageDelta holds, per bucket, what was added since the last committed flush.
	usage      map[usageKey]*db.UsageBucket
	usageDelta map[usageKey]*db.UsageBucket
}

// New loads the newest request id and the last day of aggregates.
func New(ctx context.Context, opt Options) (*Service, error) {
	if opt.MaxRows <= 0 {
		opt.MaxRows = 100_000
	}
	if opt.FlushInterval <= 0 {
		opt.FlushInterval = time.Second
	}
	if opt.Buffer <= 0 {
		opt.Buffer = 4096
	}
	if opt.Redact == nil {
		opt.Redact = func(s string) string { return redact.String(s) }
	}
	if opt.Clock == nil {
		opt.Clock = clockwork.NewRealClock()
	}
	s := &Service{opt: opt, wake: make(chan struct{}, 1), syncs: make(chan chan error), minutes: map[int64]map[dim]*cell{}, dirty: map[cellKey]struct{}{},
		usage: map[usageKey]*db.UsageBucket{}, usageDelta: map[usageKey]*db.UsageBucket{}}
	if err := s.loadUsage(ctx); err != nil {
		return nil, err
	}
	last, err := db.MaxRequestLogID(ctx, opt.DB.R)
	if err != nil {
		return nil, err
	}
	s.nextID = last + 1
	rows, err := db.ListTrafficMinutes(ctx, opt.DB.R, s.now().Unix()/60-keepMinutes)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		c := &cell{}
		if err := json.Unmarshal([]byte(r.Data), c); err != nil {
			opt.Log.Warn("skip unreadable traffic aggregate", "minute", r.Minute, "error", err)
			continue
		}
		s.cells(r.Minute)[dim{Provider: r.Provider, KeyID: r.KeyID}] = c
	}
	return s, nil
}

func (s *Service) now() time.Time { return s.opt.Clock.Now() }

// Record hands a finished request over. It never blocks: when the runner is behind by Buffer
// entries, the entry is dropped and counted.
//
// Captured bodies waiting for the runner are bounded by maxPendingBodies: beyond it an entry is
// kept without its bodies, so a runner that falls behind never holds more.
//
// A CountOnly entry is added to the aggregates at once and goes no further: a flood of refused
// requests neither fills the runner's buffer nor costs a write beyond its minute's aggregate.
func (s *Service) Record(e Entry) {
	if e.CountOnly {
		s.aggregate(&e)
		return
	}
	held := e.Capture.size()
	if held > 0 && s.bodies.Add(held) > maxPendingBodies {
		s.bodies.Add(-held)
		e.Capture, held = nil, 0
	}
	s.qmu.Lock()
	if len(s.queue) >= s.opt.Buffer {
		s.qmu.Unlock()
		s.bodies.Add(-held)
		s.dropped.Add(1)
		return
	}
	s.queue = append(s.queue, e)
	batch := len(s.queue) == takeBatch
	s.qmu.Unlock()
	if batch {
		select {
		case s.wake <- struct{}{}:
		default: // a wake-up is already due
		}
	}
}

// Dropped is how many entries were dropped because the runner was behind.
func (s *Service) Dropped() int64 { return s.dropped.Load() }

// Run takes entries in, aggregates them and writes them in batches until ctx ends; then it
// writes what is left.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.opt.FlushInterval)
	defer t.Stop()
	defer func() {
		if s.writer != nil {
			_ = s.writer.Close()
			s.writer = nil
		}
	}()
	for {
		select {
		case <-ctx.Done():
			s.take()
			_ = s.flush(context.WithoutCancel(ctx))
			return
		case <-s.wake:
			if s.take() >= flushBatch {
				_ = s.flush(ctx)
			}
		case done := <-s.syncs:
			s.take()
			done <- s.flush(ctx)
		case <-t.C:
			s.take()
			_ = s.flush(ctx)
		}
	}
}

// takeBatch is how many queued entries wake the runner before its tick: the queue stays far
// below Options.Buffer at any rate the gateway serves.
const takeBatch = 256

// flushBatch is how many pending entries are written at once, before the flush interval: a
// transaction of 1,024 rows costs up to a tenth less per row than one of 256
// (BenchmarkInsertRequestLog), and at a steady few hundred requests a second the interval
// comes first anyway.
const flushBatch = 1024

// keptEntries bounds the capacity of the entry slices kept between flushes: a burst's are let go.
const keptEntries = 2 * flushBatch

// take moves the queued entries to the pending ones, giving each its id and adding it to the
// aggregates, and returns how many are pending.
func (s *Service) take() int {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	s.qmu.Lock()
	taken := s.queue
	s.queue, s.spare = s.spare[:0], nil
	s.qmu.Unlock()
	for i := range taken {
		s.ingest(&taken[i])
	}
	s.pending = append(s.pending, taken...)
	// No strings or bodies stay reachable from the spare slice, and a burst's is not kept.
	clear(taken)
	if cap(taken) <= keptEntries {
		s.spare = taken[:0]
	}
	return len(s.pending)
}

// catchUp takes what waits in the queue, so a reader of the aggregates sees every request
// recorded before it asked.
func (s *Service) catchUp() { s.take() }

// Sync returns once every entry recorded before it is written (or ctx ends).
func (s *Service) Sync(ctx context.Context) error {
	done := make(chan error, 1)
	select {
	case s.syncs <- done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ingest gives the entry its id and adds it to the aggregates.
func (s *Service) ingest(e *Entry) {
	e.ID = s.nextID
	s.nextID++
	s.aggregate(e)
	s.addUsage(e)
}

// aggregate adds the entry to its minute's cell, to be written with the next flush.
func (s *Service) aggregate(e *Entry) {
	m := e.At.Unix() / 60
	if m < s.now().Unix()/60-keepMinutes {
		return // too old for the charts
	}
	d := dim{Provider: e.Provider, KeyID: e.ClientKeyID}
	s.mu.Lock()
	byDim := s.cells(m)
	c := byDim[d]
	if c == nil {
		c = &cell{}
		byDim[d] = c
	}
	c.add(e)
	s.dirty[cellKey{Minute: m, dim: d}] = struct{}{}
	s.mu.Unlock()
}

// cells returns the cells of a minute, creating the map; callers hold mu (or own s alone).
func (s *Service) cells(m int64) map[dim]*cell {
	byDim := s.minutes[m]
	if byDim == nil {
		byDim = map[dim]*cell{}
		s.minutes[m] = byDim
	}
	return byDim
}

// flush writes the pending entries and the changed aggregates in one transaction, then prunes
// what the retention lets go (at most once a minute).
//
// The writes never see ctx's cancellation: go-sqlite3 runs every statement given a cancellable
// context in a goroutine of its own, to interrupt it on cancellation, which cost more CPU than
// the insert itself (BenchmarkInsertRequestLog); and a flush cut short by shutdown would lose
// the entries it had taken, where finishing it takes milliseconds.
func (s *Service) flush(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	if n := s.dropped.Swap(0); n > 0 {
		s.opt.Log.Warn("request log fell behind; entries dropped", "dropped", n)
	}
	rows := s.rows[:0]
	s.tmu.Lock()
	if s.opt.Retention > 0 {
		for i := range s.pending {
			rows = append(rows, s.row(&s.pending[i]))
		}
	}
	for i := range s.pending {
		s.bodies.Add(-s.pending[i].Capture.size())
	}
	clear(s.pending)
	s.pending = s.pending[:0]
	if cap(s.pending) > keptEntries {
		s.pending = nil
	}
	s.tmu.Unlock()
	defer func() {
		clear(rows)
		s.rows = rows[:0]
		if cap(rows) > keptEntries {
			s.rows = nil
		}
	}()
	s.mu.Lock()
	minutes := make([]db.TrafficMinute, 0, len(s.dirty))
	for k := range s.dirty {
		c := s.minutes[k.Minute][k.dim]
		if c == nil {
			continue
		}
		b, err := json.Marshal(c)
		if err != nil {
			continue
		}
		minutes = append(minutes, db.TrafficMinute{Minute: k.Minute, Provider: k.Provider, KeyID: k.KeyID, Data: string(b)})
	}
	clear(s.dirty)
	usage := s.takeUsage()
	s.mu.Unlock()
	now := s.now()
	prune := now.Sub(s.lastPrune) >= time.Minute
	if len(rows) == 0 && len(minutes) == 0 && len(usage) == 0 && !prune {
		return nil
	}
	if len(rows) > 0 && s.writer == nil {
		w, err := db.NewRequestLogWriter(ctx, s.opt.DB)
		if err != nil {
			s.opt.Log.Error("write request log", "error", err, "entries", len(rows))
			return fmt.Errorf("write request log: %w", err)
		}
		s.writer = w
	}
	err := s.opt.DB.WithTx(ctx, func(tx *db.Tx) error {
		if len(rows) > 0 && s.opt.SharedIDs {
			first, err := db.ReserveIDs(ctx, tx, "request_log", "request_log", int64(len(rows)))
			if err != nil {
				return err
			}
			for i := range rows {
				rows[i].ID = first + int64(i)
			}
		}
		if len(rows) > 0 {
			if err := s.writer.Insert(ctx, tx, rows); err != nil {
				return err
			}
		}
		if err := db.UpsertTrafficMinutes(ctx, tx, minutes); err != nil {
			return err
		}
		if err := db.AddUsageBuckets(ctx, tx, usage); err != nil {
			return err
		}
		if !prune {
			return nil
		}
		before := now.Add(-s.opt.Retention).UnixMilli()
		if s.opt.Retention == 0 {
			before = math.MaxInt64 // the log is off: nothing stays
		}
		if err := db.PruneRequestLog(ctx, tx, before, s.opt.MaxRows); err != nil {
			return err
		}
		if err := db.PruneUsageBuckets(ctx, tx, bucketOf(now.Add(-usageRetention))); err != nil {
			return err
		}
		// The store's leases end on the wall clock (they are shared between replicas), not on
		// the engine's clock.
		if err := db.PruneLeases(ctx, tx, time.Now().UnixMilli()); err != nil {
			return err
		}
		return db.PruneTrafficMinutes(ctx, tx, now.Unix()/60-2*24*60)
	})
	if err != nil {
		s.restoreUsage(usage) // spend must not be lost with a store that is away for a while
		s.opt.Log.Error("write request log", "error", err, "entries", len(rows))
		return fmt.Errorf("write request log: %w", err)
	}
	if prune {
		s.lastPrune = now
		s.forgetOld(now)
		s.forgetOldUsage(now)
	}
	return nil
}

// forgetOld drops in-memory aggregates older than keepMinutes.
func (s *Service) forgetOld(now time.Time) {
	oldest := now.Unix()/60 - keepMinutes
	s.mu.Lock()
	for m := range s.minutes {
		if m < oldest {
			delete(s.minutes, m)
		}
	}
	s.mu.Unlock()
}

func (s *Service) row(e *Entry) db.RequestLogRow {
	dropped := "[]"
	if len(e.Dropped) > 0 {
		b, _ := json.Marshal(s.droppedColumn(e.Dropped))
		dropped = string(b)
	}
	req, resp := s.bodyColumns(e.Capture)
	return db.RequestLogRow{ID: e.ID, RequestID: e.RequestID, At: e.At.UnixMilli(), ClientKeyID: e.ClientKeyID,
		Surface: e.Surface, Model: e.Model, Provider: e.Provider, ConnectionID: e.ConnectionID, Connection: e.Connection,
		Status: e.Status, ErrorCode: e.ErrorCode, ErrorMsg: encodeMsg(e.Error, s.opt.Redact), Attempts: e.Attempts,
		Retries: e.Retries, Failovers: e.Failovers, LatencyUS: e.Latency.Microseconds(), TTFTUS: e.TTFT.Microseconds(),
		Stream: e.Stream, Complete: e.Complete, InputTokens: e.InputTokens, OutputTokens: e.OutputTokens,
		CacheReadTokens: e.CacheReadTokens, CacheWriteTokens: e.CacheWriteTokens, ReasoningTokens: e.ReasoningTokens,
		CostUSD: sql.NullFloat64{Float64: e.CostUSD, Valid: e.Priced}, Chain: chainJSON(e.Chain), Skipped: skippedJSON(e.Skipped), Combo: e.Combo, Route: routeJSON(e.Route), Dropped: dropped, RequestBody: nullText(req), ResponseBody: nullText(resp),
		RequestBodyTruncated: req.Truncated, ResponseBodyTruncated: resp.Truncated}
}

// maxDropped and maxDroppedName bound what the log keeps of a request's dropped names: unknown
// top-level fields are named as the client spelled them, so a client could otherwise write
// rows of any size.
const (
	maxDropped     = 32
	maxDroppedName = 100
)

// droppedColumn is what the log keeps of a request's dropped names: each redacted (a field's
// name is the client's text) and cut to maxDroppedName bytes on a character boundary, at most
// maxDropped of them, the last then saying how many more there were ("…+7").
func (s *Service) droppedColumn(names []string) []string {
	out := make([]string, 0, min(len(names), maxDropped+1))
	for i, n := range names {
		if i == maxDropped {
			out = append(out, "…+"+strconv.Itoa(len(names)-maxDropped))
			break
		}
		kept := clip([]byte(n), int64(len(n)), maxDroppedName, s.opt.Redact)
		if kept.Truncated {
			kept.Text += "…"
		}
		out = append(out, kept.Text)
	}
	return out
}

// DroppedCount is how many names a request dropped, given the names the log kept (whose last
// may count those beyond maxDropped).
func DroppedCount(kept []string) int {
	if n := len(kept); n > maxDropped {
		if more, err := strconv.Atoi(strings.TrimPrefix(kept[n-1], "…+")); err == nil {
			return n - 1 + more
		}
	}
	return len(kept)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func entryOf(r db.RequestLogRow) Entry {
	e := Entry{ID: r.ID, RequestID: r.RequestID, At: time.UnixMilli(r.At), ClientKeyID: r.ClientKeyID, Surface: r.Surface,
		Model: r.Model, Provider: r.Provider, ConnectionID: r.ConnectionID, Connection: r.Connection, Status: r.Status,
		ErrorCode: r.ErrorCode, Error: decodeMsg(r.ErrorMsg), Attempts: r.Attempts, Retries: r.Retries,
		Failovers: r.Failovers, Latency: time.Duration(r.LatencyUS) * time.Microsecond,
		TTFT: time.Duration(r.TTFTUS) * time.Microsecond, Stream: r.Stream, Complete: r.Complete,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CacheReadTokens: r.CacheReadTokens,
		CacheWriteTokens: r.CacheWriteTokens, ReasoningTokens: r.ReasoningTokens, CostUSD: r.CostUSD.Float64, Priced: r.CostUSD.Valid,
		RequestBody:  bodyOf(r.RequestBody, r.RequestBodyTruncated),
		ResponseBody: bodyOf(r.ResponseBody, r.ResponseBodyTruncated)}
	_ = json.Unmarshal([]byte(r.Chain), &e.Chain)
	_ = json.Unmarshal([]byte(r.Skipped), &e.Skipped)
	_ = json.Unmarshal([]byte(r.Route), &e.Route)
	_ = json.Unmarshal([]byte(r.Dropped), &e.Dropped)
	e.Combo = r.Combo
	return e
}

// Filter selects requests of the log; zero fields match everything.
type Filter struct {
	// Status is a class ("2xx", "3xx", "4xx", "5xx"), "error" (every failed request) or one
	// status ("429"); "" = any.
	Status   string
	Provider string
	Model    string
	Surface  string
	KeyID    int64
	Since    time.Time
	Until    time.Time
	Before   int64 // the next page: ids below this
	Limit    int   // 1–500, default 100
}

// StatusFilters are the status classes a Filter accepts besides a single status.
var StatusFilters = []string{"error", "2xx", "3xx", "4xx", "5xx", "429"}

// List returns the logged requests the filter selects, newest first, after writing what is
// pending (so a request that just finished is listed).
func (s *Service) List(ctx context.Context, f Filter) ([]Entry, error) {
	s.syncSoon(ctx)
	q := db.RequestLogFilter{Provider: f.Provider, Model: f.Model, Surface: f.Surface, ClientKeyID: f.KeyID,
		Before: f.Before, Limit: f.Limit}
	if q.Limit <= 0 || q.Limit > 500 {
		q.Limit = 100
	}
	switch f.Status {
	case "":
	case "error":
		q.Errors = true
	case "2xx", "3xx", "4xx", "5xx":
		lo := int(f.Status[0]-'0') * 100
		q.StatusMin, q.StatusMax = lo, lo+99
	default:
		var n int
		if _, err := fmt.Sscanf(f.Status, "%d", &n); err != nil || n < 100 || n > 599 {
			return nil, errs.Field("status", "err.one_of", "error, 2xx, 3xx, 4xx, 5xx, 100–599")
		}
		q.StatusMin, q.StatusMax = n, n
	}
	if !f.Since.IsZero() {
		q.Since = f.Since.UnixMilli()
	}
	if !f.Until.IsZero() {
		q.Until = f.Until.UnixMilli()
	}
	rows, err := db.ListRequestLog(ctx, s.opt.DB.R, q)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(rows))
	for i, r := range rows {
		out[i] = entryOf(r)
	}
	return out, nil
}

// Get returns one logged request.
func (s *Service) Get(ctx context.Context, id int64) (Entry, error) {
	s.syncSoon(ctx)
	r, err := db.GetRequestLog(ctx, s.opt.DB.R, id)
	if err == db.ErrNotFound {
		return Entry{}, errs.New(errs.NotFound, "err.request_not_found", id)
	}
	if err != nil {
		return Entry{}, err
	}
	return entryOf(r), nil
}

// Keeping reports whether the request log keeps rows at all (its retention is above zero).
func (s *Service) Keeping() bool { return s.opt.Retention > 0 }

// BodyBytes is how much of each body the log keeps; 0 when it keeps none. The edge captures
// bodies only when it is above zero.
func (s *Service) BodyBytes() int {
	if !s.Keeping() {
		return 0
	}
	return s.opt.BodyBytes
}

// syncSoon writes what is pending, waiting at most two seconds: a reader then sees the
// requests that just finished, and never hangs on a stopped runner.
func (s *Service) syncSoon(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = s.Sync(ctx)
}

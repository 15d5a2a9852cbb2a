// Package replicas keeps the registry of the gateway processes that share one database: each
// replica writes a heartbeat row every second, removes its row when it stops, and prunes the rows
// of replicas that died without doing so. How many replicas are live is answered from memory (a
// snapshot each heartbeat refreshes), so the request path, which divides concurrency caps among
// the live replicas, never waits on the database; when the database fails, the last known answer
// stands.
//
// Liveness compares heartbeat times written by different hosts, so the replicas' clocks are
// assumed to agree to well within the live window (NTP does that).
package replicas

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
)

// The ways a replica enforces the concurrency caps of connections, as the cap_mode column holds
// them.
const (
	// ModeRedis: the caps are global, their slots held in Redis.
	ModeRedis = "redis"
	// ModeShare: each replica enforces ⌈cap ÷ live replicas⌉ on its own.
	ModeShare = "share"
	// ModeSingle: one replica, which enforces the caps as they are.
	ModeSingle = "single"
)

// The defaults of Options.
const (
	DefaultInterval   = time.Second
	DefaultLiveWindow = 5 * time.Second
	DefaultPruneAfter = 30 * time.Second
)

// maxWarnGap is the longest a failing heartbeat goes without a warning: the warnings back off
// from one per failure to one per this.
const maxWarnGap = time.Minute

// leaveTimeout bounds the removal of the replica's own row at shutdown; the others prune it
// when it does not go.
const leaveTimeout = 2 * time.Second

// Self describes this replica to the others and to people.
type Self struct {
	// Name is for people: the host name and the listen address.
	Name string
	// Addr is the listen address.
	Addr string
	// Version is the build's version.
	Version string
	// CapMode is ModeRedis, ModeShare or ModeSingle (the default when empty).
	CapMode string
}

// Options configure a Registry.
type Options struct {
	DB *db.DB
	// ID is this replica's id, when another part of the process (the broadcast between
	// replicas) drew it already, so that everything names the replica alike. Default: a new
	// random id.
	ID string
	// Clock times the heartbeats and ages them (default: the real clock).
	Clock clockwork.Clock
	// Log receives the heartbeat's failures and the replicas that come and go (default: none).
	Log  *slog.Logger
	Self Self
	// Interval is the time between heartbeats (default 1 s).
	Interval time.Duration
	// LiveWindow is how old a replica's last heartbeat may be for it to count as live (default
	// 5 s). It also bounds one heartbeat's database work: a beat that takes longer is too late.
	LiveWindow time.Duration
	// PruneAfter is how old a replica's last heartbeat must be before its row is deleted
	// (default 30 s; never less than LiveWindow): long enough that a replica paused for a moment
	// keeps its row and its start time.
	PruneAfter time.Duration
}

// Replica is one replica as the dashboard shows it.
type Replica struct {
	ID      string
	Name    string
	Addr    string
	Version string
	CapMode string
	Started time.Time
	// Heartbeat is when the replica last wrote its row; HeartbeatAge is how long ago that was
	// when List was called.
	Heartbeat    time.Time
	HeartbeatAge time.Duration
	// Live is whether the heartbeat was within the live window at the last refresh.
	Live bool
	// Self marks the replica List was called on.
	Self bool
}

// Registry is this replica's entry in the registry and its view of the others.
type Registry struct {
	opt     Options
	id      string
	started time.Time
	snap    atomic.Pointer[snapshot]

	// beatMu serialises Beat; prevBeat is when the previous one began (zero before the first).
	beatMu   sync.Mutex
	prevBeat time.Time

	// Only Run's goroutine touches these.
	failures int
	warnGap  time.Duration
	nextWarn time.Time
}

// snapshot is what the last successful heartbeat read: every row and which of them were live.
type snapshot struct {
	rows []db.Replica
	live []bool // by index of rows
	// count is the number of live replicas, this one included even when its row is missing.
	count int
	// at is the time of the heartbeat that read it; zero before the first.
	at time.Time
}

// New builds the registry of a replica that starts now. Run makes it known to the others.
func New(opt Options) *Registry {
	if opt.Clock == nil {
		opt.Clock = clockwork.NewRealClock()
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.Self.CapMode == "" {
		opt.Self.CapMode = ModeSingle
	}
	if opt.Interval <= 0 {
		opt.Interval = DefaultInterval
	}
	if opt.LiveWindow <= 0 {
		opt.LiveWindow = DefaultLiveWindow
	}
	if opt.PruneAfter <= 0 {
		opt.PruneAfter = DefaultPruneAfter
	}
	opt.PruneAfter = max(opt.PruneAfter, opt.LiveWindow)
	if opt.ID == "" {
		opt.ID = newID()
	}
	r := &Registry{opt: opt, id: opt.ID, started: opt.Clock.Now()}
	r.snap.Store(&snapshot{count: 1})
	return r
}

// newID is a random id for one start of the process: short enough for a metric label, long
// enough that two replicas never draw the same.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// ID is this replica's id.
func (r *Registry) ID() string { return r.id }

// Name is this replica's name for people.
func (r *Registry) Name() string { return r.opt.Self.Name }

// Mode is how this replica enforces the concurrency caps: ModeRedis, ModeShare or ModeSingle.
func (r *Registry) Mode() string { return r.opt.Self.CapMode }

// Live is the number of replicas that counted as live at the last refresh (see Beat), this one
// always included: at least 1. It reads memory only, so the request path may call it.
func (r *Registry) Live() int { return r.snap.Load().count }

// List is every replica the last refresh saw, this one always included, by name (then id).
func (r *Registry) List() []Replica {
	s := r.snap.Load()
	now := r.opt.Clock.Now()
	out := make([]Replica, 0, len(s.rows)+1)
	seen := false
	for i, row := range s.rows {
		self := row.ID == r.id
		seen = seen || self
		out = append(out, replicaOf(row, now, s.live[i] || self, self))
	}
	if !seen {
		// Before the first heartbeat, or pruned at once by replicas whose clocks run far ahead:
		// it runs all the same.
		beat := s.at
		if beat.IsZero() {
			beat = r.started
		}
		out = append(out, replicaOf(r.row(beat), now, true, true))
	}
	slices.SortFunc(out, func(a, b Replica) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	return out
}

func replicaOf(row db.Replica, now time.Time, live, self bool) Replica {
	beat := time.UnixMilli(row.HeartbeatAt)
	return Replica{ID: row.ID, Name: row.Name, Addr: row.Addr, Version: row.Version, CapMode: row.CapMode,
		Started: time.UnixMilli(row.StartedAt), Heartbeat: beat, HeartbeatAge: max(now.Sub(beat), 0), Live: live, Self: self}
}

// row is this replica's row with a heartbeat at beat.
func (r *Registry) row(beat time.Time) db.Replica {
	s := r.opt.Self
	return db.Replica{ID: r.id, Name: s.Name, Addr: s.Addr, Version: s.Version, CapMode: s.CapMode,
		StartedAt: r.started.UnixMilli(), HeartbeatAt: beat.UnixMilli()}
}

// Beat writes one heartbeat, prunes the rows of replicas gone for longer than PruneAfter and
// refreshes the snapshot Live and List read. On an error the snapshot stays as it was.
//
// A replica that beat since this one's previous beat counts as live, and its row stays, however
// far the clock moved in between: this process may have been paused, or the clock is a test's
// fake one that jumped, and the others had no chance to beat in the meantime.
func (r *Registry) Beat(ctx context.Context) error {
	r.beatMu.Lock()
	defer r.beatMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.opt.LiveWindow)
	defer cancel()
	now := r.opt.Clock.Now()
	liveFrom, pruneBefore := now.Add(-r.opt.LiveWindow), now.Add(-r.opt.PruneAfter)
	if prev := r.prevBeat; !prev.IsZero() {
		liveFrom, pruneBefore = earliest(liveFrom, prev), earliest(pruneBefore, prev)
	}
	r.prevBeat = now
	if err := db.UpsertReplica(ctx, r.opt.DB.W, r.row(now)); err != nil {
		return err
	}
	if _, err := db.DeleteStaleReplicas(ctx, r.opt.DB.W, pruneBefore.UnixMilli()); err != nil {
		return err
	}
	rows, err := db.ListReplicas(ctx, r.opt.DB.R)
	if err != nil {
		return err
	}
	next := &snapshot{rows: rows, live: make([]bool, len(rows)), count: 1, at: now}
	for i, row := range rows {
		next.live[i] = row.HeartbeatAt >= liveFrom.UnixMilli()
		if next.live[i] && row.ID != r.id {
			next.count++
		}
	}
	r.noteChanges(r.snap.Swap(next), next)
	return nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// noteChanges logs the replicas that became live or stopped being live between two snapshots.
func (r *Registry) noteChanges(prev, next *snapshot) {
	was, is := r.others(prev), r.others(next)
	for id, row := range is {
		if _, ok := was[id]; !ok {
			r.opt.Log.Info("replica joined", "replica", id, "name", row.Name, "version", row.Version,
				"cap_mode", row.CapMode, "live_replicas", next.count)
		}
	}
	for id, row := range was {
		if _, ok := is[id]; !ok {
			r.opt.Log.Info("replica left", "replica", id, "name", row.Name, "live_replicas", next.count)
		}
	}
}

// others are the live replicas of a snapshot other than this one, by id.
func (r *Registry) others(s *snapshot) map[string]db.Replica {
	out := map[string]db.Replica{}
	for i, row := range s.rows {
		if s.live[i] && row.ID != r.id {
			out[row.ID] = row
		}
	}
	return out
}

// Run writes a heartbeat every Interval until ctx ends, then removes this replica's row (best
// effort: the others prune it when that fails). A failing heartbeat is tried again at every
// interval, with warnings that back off; Live keeps its last known value meanwhile.
func (r *Registry) Run(ctx context.Context) {
	defer r.leave(context.WithoutCancel(ctx))
	for {
		r.beat(ctx)
		t := r.opt.Clock.NewTimer(r.opt.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
	}
}

// beat runs one heartbeat and logs how it went.
func (r *Registry) beat(ctx context.Context) {
	err := r.Beat(ctx)
	if ctx.Err() != nil {
		return // stopping: not the store's failure
	}
	if err == nil {
		if r.failures > 0 {
			r.opt.Log.Info("replica heartbeat: the database answers again", "failed_beats", r.failures)
		}
		r.failures, r.warnGap = 0, 0
		return
	}
	r.failures++
	now := r.opt.Clock.Now()
	if r.failures == 1 || !now.Before(r.nextWarn) {
		r.warnGap = min(max(2*r.warnGap, r.opt.Interval), maxWarnGap)
		r.nextWarn = now.Add(r.warnGap)
		r.opt.Log.Warn("replica heartbeat failed; keeping the last known replicas", "error", err,
			"failed_beats", r.failures, "live_replicas", r.Live(), "next_warning_in", r.warnGap)
	}
}

// leave removes this replica's row.
func (r *Registry) leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, leaveTimeout)
	defer cancel()
	if err := db.DeleteReplica(ctx, r.opt.DB.W, r.id); err != nil && !errors.Is(err, db.ErrNotFound) {
		r.opt.Log.Warn("replica: could not remove its row at shutdown; the others prune it",
			"replica", r.id, "error", err, "prune_after", r.opt.PruneAfter)
	}
}

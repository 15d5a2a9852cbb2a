// Package sessions keeps the dashboard's logins on the server. A login gets a random id that
// only the browser's cookie holds; the database stores its SHA-256, when it began and when it
// was last used. Every use checks the absolute and idle lifetimes (runtime settings, see
// Settings), so logging out, logging out everywhere and expiry end a session at once, and a
// copied cookie is worthless afterwards.
package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/db"
	"switchyard/services/errs"
	"switchyard/services/secrets"
)

// idBytes is the entropy of a session id (256 bits); the id is 43 base64url characters.
const idBytes = 32

// touchEvery bounds how often a session's last use is written: a busy dashboard costs one small
// write a minute, not one a request. The idle lifetime is measured from the last write, so a
// session in use may end up to this much early; touchInterval keeps that below a quarter of a
// short idle lifetime.
const touchEvery = time.Minute

// touchInterval is how stale a session's recorded last use may grow before a use writes it: a
// minute, or a quarter of the idle lifetime when that is shorter. A session used more often than
// the idle lifetime therefore never ends for idleness (with a one-minute idle lifetime and a
// write only every minute, a session used every 20 s would end at its third use).
func touchInterval(idle time.Duration) time.Duration {
	return min(touchEvery, idle/4)
}

// Session is a live session.
type Session struct {
	// IDHash is the SHA-256 (hex) of the cookie's id: what the database knows it by.
	IDHash     string
	CreatedAt  time.Time
	LastSeenAt time.Time
	// Flashes are the one-time messages waiting for the next page.
	Flashes []Flash
}

// Flash is a one-time message shown on the next page of a session.
type Flash struct {
	Kind string `json:"kind"` // "success", "error" or "info"
	Text string `json:"text"`
}

// Store is the key/value persistence the settings need (db.KV).
type Store interface {
	GetValue(ctx context.Context, key string) (value string, ok bool, err error)
	SaveRevision(ctx context.Context, key, value string) (revision int64, err error)
}

// Service creates, checks and ends sessions.
type Service struct {
	db  *db.DB
	kv  Store
	now func() time.Time

	saved atomic.Pointer[saved] // the operator's saved settings; Settings() overlays the defaults
	mu    sync.Mutex            // serialises settings saves
	// committed hear Topic after every committed save (OnCommitted).
	committed []func(topic string)

	// known are the sessions read from the store lately, by id hash: while a shared store is
	// unreachable, a replica keeps its operators signed in on what it last read (their
	// lifetimes still count), instead of logging everyone out of the dashboard that shows
	// the outage.
	knownMu sync.Mutex
	known   map[string]knownSession
}

// knownSession is a session as last read from the store.
type knownSession struct{ created, seen time.Time }

// maxKnown bounds the sessions remembered for an outage; beyond it the oldest go.
const maxKnown = 1024

// New loads the saved settings; now is the clock every lifetime is measured on. A saved value
// that no longer validates is dropped (its default applies) and reported in the returned
// warnings, never fatal.
func New(ctx context.Context, d *db.DB, kv Store, now func() time.Time) (*Service, []string, error) {
	s := &Service{db: d, kv: kv, now: now}
	warnings, err := s.load(ctx)
	if err != nil {
		return nil, nil, err
	}
	return s, warnings, nil
}

// Topic names the session settings to the replicas sharing the store (OnCommitted, Reload).
const Topic = "session_settings"

// OnCommitted registers fn to hear Topic after every committed settings save.
func (s *Service) OnCommitted(fn func(topic string)) {
	s.mu.Lock()
	s.committed = append(s.committed, fn)
	s.mu.Unlock()
}

// Reload reads the saved settings again: another replica saved them.
func (s *Service) Reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.load(ctx)
	return err
}

// load reads the saved settings into s.saved.
func (s *Service) load(ctx context.Context) ([]string, error) {
	raw, ok, err := s.kv.GetValue(ctx, SettingsKey)
	if err != nil {
		return nil, fmt.Errorf("sessions: load settings: %w", err)
	}
	var sv saved
	var warnings []string
	if ok {
		if err := json.Unmarshal([]byte(raw), &sv); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: saved settings ignored: %v", SettingsKey, err))
			sv = saved{}
		}
		for name, f := range sv.fields() {
			if *f != nil && !inRange(name, **f) {
				warnings = append(warnings, fmt.Sprintf("%s: saved value ignored: %s: %d is out of range", SettingsKey, name, **f))
				*f = nil
			}
		}
	}
	s.saved.Store(&sv)
	return warnings, nil
}

// newID returns a fresh session id and its hash.
func newID() (id, hash string) {
	id = secrets.RandomToken(idBytes)
	return id, HashID(id)
}

// HashID is what the database knows a session id by (Session.IDHash): its SHA-256, in hex.
func HashID(id string) string { return secrets.SHA256Hex(id) }

// wellFormed reports whether id could be one of ours, so junk costs no database read.
func wellFormed(id string) bool {
	if len(id) != 43 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Create starts a session and returns the id for the cookie (the only place it is kept). It
// also removes sessions that expired meanwhile, so the table holds only live ones and the few
// that expired since the last login.
func (s *Service) Create(ctx context.Context) (string, error) {
	now := s.now()
	set := s.Settings()
	if err := db.DeleteExpiredSessions(ctx, s.db.W, now.Add(-set.Absolute()).UnixMilli(), now.Add(-set.Idle()).UnixMilli()); err != nil {
		return "", err
	}
	id, hash := newID()
	ms := now.UnixMilli()
	if err := db.InsertSession(ctx, s.db.W, db.Session{IDHash: hash, CreatedAt: ms, LastSeenAt: ms}); err != nil {
		return "", err
	}
	return id, nil
}

// Lookup returns the live session of a cookie's id, nil when there is none: unknown, ended, or
// past its absolute or idle lifetime (then it is removed). A use is recorded at most once per
// touchInterval.
func (s *Service) Lookup(ctx context.Context, id string) (*Session, error) {
	if !wellFormed(id) {
		return nil, nil
	}
	hash := HashID(id)
	row, err := db.GetSession(ctx, s.db.R, hash)
	if errors.Is(err, db.ErrNotFound) {
		s.forget(hash)
		return nil, nil
	}
	if err != nil {
		return s.lastKnown(hash, err)
	}
	now := s.now()
	set := s.Settings()
	created, seen := time.UnixMilli(row.CreatedAt), time.UnixMilli(row.LastSeenAt)
	s.remember(hash, created, seen)
	if !now.Before(created.Add(set.Absolute())) || !now.Before(seen.Add(set.Idle())) {
		return nil, db.DeleteSession(ctx, s.db.W, hash)
	}
	if now.Sub(seen) >= touchInterval(set.Idle()) {
		if err := db.TouchSession(ctx, s.db.W, hash, now.UnixMilli()); err != nil {
			return nil, err
		}
		seen = now
	}
	sess := &Session{IDHash: hash, CreatedAt: created, LastSeenAt: seen}
	if err := json.Unmarshal([]byte(row.Flashes), &sess.Flashes); err != nil {
		sess.Flashes = nil // a damaged message list is dropped, the session stays
	}
	return sess, nil
}

// End ends one session (logout).
func (s *Service) End(ctx context.Context, idHash string) error {
	s.forget(idHash)
	return db.DeleteSession(ctx, s.db.W, idHash)
}

// EndAll ends every session ("log out everywhere") and returns how many there were.
func (s *Service) EndAll(ctx context.Context) (int64, error) {
	s.knownMu.Lock()
	s.known = nil
	s.knownMu.Unlock()
	return db.DeleteAllSessions(ctx, s.db.W)
}

// remember notes a session read from the store.
func (s *Service) remember(hash string, created, seen time.Time) {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	if s.known == nil {
		s.known = map[string]knownSession{}
	}
	if _, ok := s.known[hash]; !ok && len(s.known) >= maxKnown {
		oldest, at := "", time.Time{}
		for h, k := range s.known {
			if oldest == "" || k.seen.Before(at) {
				oldest, at = h, k.seen
			}
		}
		delete(s.known, oldest)
	}
	s.known[hash] = knownSession{created: created, seen: seen}
}

func (s *Service) forget(hash string) {
	s.knownMu.Lock()
	delete(s.known, hash)
	s.knownMu.Unlock()
}

// lastKnown answers a lookup the store could not: the session as last read, while its
// lifetimes (measured from that read) allow; else the store's error.
func (s *Service) lastKnown(hash string, err error) (*Session, error) {
	s.knownMu.Lock()
	k, ok := s.known[hash]
	s.knownMu.Unlock()
	set := s.Settings()
	now := s.now()
	if !ok || !now.Before(k.created.Add(set.Absolute())) || !now.Before(k.seen.Add(set.Idle())) {
		return nil, err
	}
	return &Session{IDHash: hash, CreatedAt: k.created, LastSeenAt: k.seen}, nil
}

// AddFlash queues a message for the session's next page.
func (s *Service) AddFlash(ctx context.Context, idHash string, f Flash) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return db.AppendSessionFlash(ctx, s.db.W, idHash, string(b))
}

// TakeFlashes returns the session's waiting messages and clears them, in one transaction.
func (s *Service) TakeFlashes(ctx context.Context, idHash string) ([]Flash, error) {
	var raw string
	err := s.db.WithTx(ctx, func(tx *db.Tx) error {
		var err error
		raw, err = db.TakeSessionFlashes(ctx, tx, idHash)
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []Flash
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, nil
	}
	return out, nil
}

// Settings returns the effective lifetimes.
func (s *Service) Settings() Settings { return s.saved.Load().effective() }

// Document is the settings as the admin API shows them: each value and the layer it came from
// ("default" or "persisted").
type Document struct {
	Values  Settings          `json:"values"`
	Sources map[string]string `json:"sources"`
}

// Document returns the effective settings with their sources.
func (s *Service) Document() Document {
	sv := s.saved.Load()
	d := Document{Values: sv.effective(), Sources: map[string]string{}}
	for name, f := range sv.fields() {
		d.Sources[name] = "default"
		if *f != nil {
			d.Sources[name] = "persisted"
		}
	}
	return d
}

// Save validates a partial update (null returns a field to its default), commits it and applies
// it to every session at once. An invalid value → errs.Fields, nothing saved.
func (s *Service) Save(ctx context.Context, p Patch) (Document, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := *s.saved.Load()
	dst := next.fields()
	fields := map[string]errs.Msg{}
	for name, o := range p.fields() {
		switch {
		case !o.Set:
		case o.Value == nil:
			*dst[name] = nil
		case !inRange(name, *o.Value):
			r := ranges[name]
			fields[name] = errs.M("err.between", r[0], r[1])
		default:
			v := *o.Value
			*dst[name] = &v
		}
	}
	if len(fields) > 0 {
		return Document{}, errs.Fields(fields)
	}
	doc, err := json.Marshal(next)
	if err != nil {
		return Document{}, err
	}
	if _, err := s.kv.SaveRevision(ctx, SettingsKey, string(doc)); err != nil {
		return Document{}, err
	}
	s.saved.Store(&next)
	for _, fn := range s.committed {
		fn(Topic) // hands the topic on without calling back (replication.changed)
	}
	return s.Document(), nil
}

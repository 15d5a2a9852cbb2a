// Package clientkeys issues and checks the keys clients use to call the proxy. Only a SHA-256
// hash of each key is stored; checks are answered from memory and last-used times are written
// in batches off the request path.
package clientkeys

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/db"
	"switchyard/services/errs"
	"switchyard/services/names"
	"switchyard/services/secrets"
)

// KeyPrefix starts every client key, so leaked keys are recognisable.
const KeyPrefix = "sk-sy-"

// Key is the public view of a client key (never the key itself).
type Key struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	Prefix     string `json:"prefix"`
	CreatedAt  int64  `json:"created_at"`
	LastUsedAt *int64 `json:"last_used_at"`
	RevokedAt  *int64 `json:"revoked_at"`
}

// Created is returned once, when a key is made: it is the only time the key is shown.
type Created struct {
	Key
	Secret string `json:"key"`
}

// Identity is who a valid key belongs to.
type Identity struct {
	KeyID int64
	Name  string
}

// Service issues, revokes and checks client keys.
type Service struct {
	db  *db.DB
	log *slog.Logger
	now func() time.Time

	active atomic.Pointer[map[string]*entry] // key hash → entry, for keys not revoked
	mu     sync.Mutex                        // guards writes and rebuilds
}

// entry is one active key; lastUsed is written on the request path without locks and flushed
// to the database by Run.
type entry struct {
	Identity
	lastUsed atomic.Int64 // unix ms of the latest use; 0 = not used since load
	flushed  atomic.Int64 // the lastUsed value last written
}

// New loads the active keys into memory.
func New(ctx context.Context, d *db.DB, log *slog.Logger, now func() time.Time) (*Service, error) {
	s := &Service{db: d, log: log, now: now}
	if err := s.reload(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Service) reload(ctx context.Context) error {
	rows, err := db.ListClientKeys(ctx, s.db.W)
	if err != nil {
		return err
	}
	old := s.active.Load()
	m := make(map[string]*entry, len(rows))
	for _, r := range rows {
		if r.RevokedAt.Valid {
			continue
		}
		if old != nil {
			if prev, ok := (*old)[r.KeyHash]; ok { // keep unflushed use times across reloads
				m[r.KeyHash] = prev
				continue
			}
		}
		m[r.KeyHash] = &entry{Identity: Identity{KeyID: r.ID, Name: r.Name}}
	}
	s.active.Store(&m)
	return nil
}

// Authenticate checks a presented key against the active keys without touching the database.
func (s *Service) Authenticate(presented string) (Identity, bool) {
	if !strings.HasPrefix(presented, KeyPrefix) || len(presented) > 200 {
		return Identity{}, false
	}
	// The lookup is by SHA-256 of the key: equal hashes mean equal keys, and the map's timing
	// depends on the hash, not on how much of the secret matched.
	e, ok := (*s.active.Load())[secrets.SHA256Hex(presented)]
	if !ok {
		return Identity{}, false
	}
	e.lastUsed.Store(s.now().UnixMilli())
	return e.Identity, true
}

// Create makes a new key and returns it; the key is not retrievable later.
func (s *Service) Create(ctx context.Context, name string) (Created, error) {
	name = strings.TrimSpace(name)
	if m, bad := names.Check(name); bad {
		return Created{}, errs.Fields(map[string]errs.Msg{"name": m})
	}
	secret := KeyPrefix + secrets.RandomToken(32)
	row := db.ClientKey{Name: name, Prefix: secret[:len(KeyPrefix)+6], KeyHash: secrets.SHA256Hex(secret)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := db.InsertClientKey(ctx, s.db.W, &row); err != nil {
		return Created{}, err
	}
	if err := s.reload(ctx); err != nil {
		return Created{}, err
	}
	return Created{Key: view(row), Secret: secret}, nil
}

// Revoke disables a key at once.
func (s *Service) Revoke(ctx context.Context, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := db.RevokeClientKey(ctx, s.db.W, id); err != nil {
		if err == db.ErrNotFound {
			return errs.New(errs.NotFound, "err.key_not_found", id)
		}
		return err
	}
	return s.reload(ctx)
}

// List returns every key, newest first, with pending last-used times applied.
func (s *Service) List(ctx context.Context) ([]Key, error) {
	rows, err := db.ListClientKeys(ctx, s.db.R)
	if err != nil {
		return nil, err
	}
	pending := map[int64]int64{}
	for _, e := range *s.active.Load() {
		if at := e.lastUsed.Load(); at > 0 {
			pending[e.KeyID] = at
		}
	}
	out := make([]Key, len(rows))
	for i, r := range rows {
		out[i] = view(r)
		if at, ok := pending[r.ID]; ok && (out[i].LastUsedAt == nil || *out[i].LastUsedAt < at) {
			out[i].LastUsedAt = &at
		}
	}
	return out, nil
}

// Run flushes last-used times every interval until ctx ends, then once more.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.Flush(context.WithoutCancel(ctx))
			return
		case <-t.C:
			s.Flush(ctx)
		}
	}
}

// Flush writes pending last-used times.
func (s *Service) Flush(ctx context.Context) {
	batch := map[int64]int64{}
	var done []func()
	for _, e := range *s.active.Load() {
		if at := e.lastUsed.Load(); at > e.flushed.Load() {
			batch[e.KeyID] = at
			done = append(done, func() { e.flushed.Store(at) })
		}
	}
	if len(batch) == 0 {
		return
	}
	if err := db.TouchClientKeys(ctx, s.db.W, batch); err != nil {
		s.log.Warn("record client key use", "error", err)
		return
	}
	for _, fn := range done {
		fn()
	}
}

func view(r db.ClientKey) Key {
	k := Key{ID: r.ID, Name: r.Name, Prefix: r.Prefix, CreatedAt: r.CreatedAt}
	if r.LastUsedAt.Valid {
		v := r.LastUsedAt.Int64
		k.LastUsedAt = &v
	}
	if r.RevokedAt.Valid {
		v := r.RevokedAt.Int64
		k.RevokedAt = &v
	}
	return k
}

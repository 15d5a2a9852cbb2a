// Package clientkeys issues and checks the keys clients use to call the proxy. Only a SHA-256
// hash of each key is stored; checks are answered from memory and last-used times are written
// in batches off the request path.
package clientkeys

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"switchyard/db"
	"switchyard/services/announce"
	"switchyard/services/errs"
	"switchyard/services/secrets"
	"switchyard/services/spend"
)

// KeyPrefix starts every client key, so leaked keys are recognisable.
const KeyPrefix = "sk-sy-"

// ScopeLeaseExclusive lets a key acquire exclusive session leases on its allowed connections.
const ScopeLeaseExclusive = "lease:exclusive"

// Key is the public view of a client key (never the key itself).
type Key struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	Prefix     string `json:"prefix"`
	CreatedAt  int64  `json:"created_at"`
	LastUsedAt *int64 `json:"last_used_at"`
	RevokedAt  *int64 `json:"revoked_at"`
	// AllowedModels are glob patterns over provider/model and combo names; empty = every model.
	AllowedModels []string `json:"allowed_models"`
	// Scopes are the key's extra rights; only ScopeLeaseExclusive exists.
	Scopes []string `json:"scopes"`
	// AllowedConnections are the ids of the connections the key may lease (existing ones only).
	AllowedConnections []int64 `json:"allowed_connections"`
	// Limits are the key's limits (flat in the JSON: rpm_limit, …; absent = none).
	spend.Limits
}

// Input creates or changes a key; a nil field is left as it is (on create: empty).
type Input struct {
	Name               *string   `json:"name"`
	AllowedModels      *[]string `json:"allowed_models"`
	Scopes             *[]string `json:"scopes"`
	AllowedConnections *[]int64  `json:"allowed_connections"`
	// LimitsInput changes the key's limits (flat in the JSON; 0 removes one).
	spend.LimitsInput
}

// Created is returned once, when a key is made: it is the only time the key is shown.
type Created struct {
	Key
	Secret string `json:"key"`
}

// Identity is who a valid key belongs to and what it may address: the edge puts it on the
// request, so the engine checks the key's allow-lists without a database read.
type Identity struct {
	KeyID int64
	Name  string
	// Access is the key's compiled allow-lists; nil allows every model and no lease.
	Access *Access
	// Limits are the key's limits (zero: none).
	Limits spend.Limits
}

// Access is what a key may address, compiled when the keys are loaded and never changed after
// (a change builds a new one).
type Access struct {
	// Models is the compiled allowed_models; nil allows every model.
	Models *ModelPatterns
	// Exclusive is the scope lease:exclusive.
	Exclusive bool
	// Connections are the connection ids the key may lease.
	Connections []int64
}

// AllowsModel reports whether the key may address a model (provider/model or a combo name, as
// the client wrote it or as a bare name resolved). A nil Access allows every model.
func (a *Access) AllowsModel(model string) bool {
	return a == nil || a.Models.Match(model)
}

// RestrictsModels reports whether the key has an allowed_models list at all.
func (a *Access) RestrictsModels() bool { return a != nil && a.Models != nil }

// MayLease reports whether the key has the scope lease:exclusive.
func (a *Access) MayLease() bool { return a != nil && a.Exclusive }

// LeaseConnections are the connection ids the key may lease.
func (a *Access) LeaseConnections() []int64 {
	if a == nil {
		return nil
	}
	return a.Connections
}

// ChangeHook runs after a key's access changed or it was revoked (active false), once the change
// is committed: what depends on the key (its session leases) follows.
type ChangeHook func(ctx context.Context, keyID int64, access *Access, active bool)

// Service issues, revokes and checks client keys.
type Service struct {
	db  *db.DB
	log *slog.Logger
	now func() time.Time
	// exists reports whether a connection id exists (allowed_connections must name existing ones).
	exists func(id int64) bool
	hooks  []ChangeHook

	active atomic.Pointer[map[keyHash]*entry] // key hash → entry, for keys not revoked
	mu     sync.Mutex                         // guards writes and rebuilds
	// commits are the OnCommitted functions and whether a write committed since mu was taken.
	commits announce.Commits
}

// entry is one active key; lastUsed is written on the request path without locks and flushed
// to the database by Run.
type entry struct {
	Identity
	stored   string       // the access columns it was compiled from, to tell a changed key
	lastUsed atomic.Int64 // unix ms of the latest use; 0 = not used since load
	flushed  atomic.Int64 // the lastUsed value last written
}

// New loads the active keys into memory. connectionExists tells whether a connection id exists
// (the catalog's registry): allowed_connections may name only existing connections.
func New(ctx context.Context, d *db.DB, log *slog.Logger, now func() time.Time, connectionExists func(id int64) bool) (*Service, error) {
	s := &Service{db: d, log: log, now: now, exists: connectionExists, commits: announce.New(Topic)}
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
	m := make(map[keyHash]*entry, len(rows))
	for _, r := range rows {
		if r.RevokedAt.Valid {
			continue
		}
		hash, ok := parseKeyHash(r.KeyHash)
		if !ok { // only a hand-edited database gets here: no presented key can match it
			s.log.Warn("client key hash unreadable; the key is refused", "key_id", r.ID)
			continue
		}
		stored := r.AllowedModels + "\x00" + r.Scopes + "\x00" + r.AllowedConnections + "\x00" + r.Limits
		var prev *entry
		if old != nil {
			prev = (*old)[hash]
		}
		if prev != nil && prev.Name == r.Name && prev.stored == stored {
			m[hash] = prev // unchanged
			continue
		}
		access, err := compileAccess(r)
		if err != nil { // only a hand-edited database gets here: such a key may address nothing
			s.log.Warn("client key access lists unreadable; the key is refused every model", "key_id", r.ID, "error", err)
			access = &Access{Models: &ModelPatterns{exact: map[string]struct{}{}}}
		}
		e := &entry{Identity: Identity{KeyID: r.ID, Name: r.Name, Access: access, Limits: decodeLimits(r.Limits)}, stored: stored}
		if prev != nil { // keep the unflushed use time across the change
			e.lastUsed.Store(prev.lastUsed.Load())
			e.flushed.Store(prev.flushed.Load())
		}
		m[hash] = e
	}
	s.active.Store(&m)
	return nil
}

// Authenticate checks a presented key against the active keys without touching the database.
// The identity is the key's own, shared and never changed (a change to the key makes a new
// one): a request holds it without a copy.
func (s *Service) Authenticate(presented string) (*Identity, bool) {
	if !strings.HasPrefix(presented, KeyPrefix) || len(presented) > 200 {
		return nil, false
	}
	// The lookup is by SHA-256 of the key: equal hashes mean equal keys, and the map's timing
	// depends on the hash, not on how much of the secret matched.
	// The key is hashed where it stands (sha256 only reads it) and looked up by the raw sum: no
	// copy and no hex string per request.
	e, ok := (*s.active.Load())[sha256.Sum256(unsafe.Slice(unsafe.StringData(presented), len(presented)))]
	if !ok {
		return nil, false
	}
	e.lastUsed.Store(s.now().UnixMilli())
	return &e.Identity, true
}

// Create makes a new key and returns it; the key is not retrievable later. The name is required;
// the access lists are optional (none: every model, no lease).
func (s *Service) Create(ctx context.Context, in Input) (Created, error) {
	row := db.ClientKey{}
	if in.Name == nil {
		in.Name = new(string)
	}
	s.mu.Lock()
	defer s.unlock()
	if err := s.apply(&row, in); err != nil {
		return Created{}, err
	}
	secret := KeyPrefix + secrets.RandomToken(32)
	row.Prefix, row.KeyHash = secret[:len(KeyPrefix)+6], secrets.SHA256Hex(secret)
	if err := db.InsertClientKey(ctx, s.db.W, &row); err != nil {
		return Created{}, err
	}
	s.commits.Mark()
	if err := s.reload(ctx); err != nil {
		return Created{}, err
	}
	return Created{Key: s.view(row), Secret: secret}, nil
}

// Get returns one key.
func (s *Service) Get(ctx context.Context, id int64) (Key, error) {
	row, err := db.GetClientKey(ctx, s.db.R, id)
	if err == db.ErrNotFound {
		return Key{}, errs.New(errs.NotFound, "err.key_not_found", id)
	}
	if err != nil {
		return Key{}, err
	}
	k := s.view(row)
	if e := s.entryOf(id); e != nil {
		if at := e.lastUsed.Load(); at > 0 && (k.LastUsedAt == nil || *k.LastUsedAt < at) {
			k.LastUsedAt = &at
		}
	}
	return k, nil
}

// Update changes a key's name and access lists (the fields given; the others stay). A revoked key
// cannot be changed. The new lists apply to the key's next request; the change hooks then run
// (a lease the key may no longer hold is released).
func (s *Service) Update(ctx context.Context, id int64, in Input) (Key, error) {
	s.mu.Lock()
	defer s.unlock()
	row, err := db.GetClientKey(ctx, s.db.W, id)
	if err == db.ErrNotFound {
		return Key{}, errs.New(errs.NotFound, "err.key_not_found", id)
	}
	if err != nil {
		return Key{}, err
	}
	if row.RevokedAt.Valid {
		return Key{}, errs.New(errs.Conflict, "keys.err.revoked", row.Name)
	}
	if err := s.apply(&row, in); err != nil {
		return Key{}, err
	}
	if err := db.UpdateClientKey(ctx, s.db.W, row); err != nil {
		if err == db.ErrNotFound {
			return Key{}, errs.New(errs.NotFound, "err.key_not_found", id)
		}
		return Key{}, err
	}
	s.commits.Mark()
	if err := s.reload(ctx); err != nil {
		return Key{}, err
	}
	access, _ := compileAccess(row)
	s.notify(ctx, id, access, true)
	return s.view(row), nil
}

// OnChange registers fn to run after a key's access changed or it was revoked; hooks add up.
func (s *Service) OnChange(fn ChangeHook) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = append(s.hooks, fn)
}

// notify runs the change hooks; the caller holds s.mu.
func (s *Service) notify(ctx context.Context, id int64, access *Access, active bool) {
	for _, fn := range s.hooks {
		fn(ctx, id, access, active)
	}
}

// NameOf is the name of the active key with this id ("" when none is), from memory.
func (s *Service) NameOf(id int64) string {
	if e := s.entryOf(id); e != nil {
		return e.Name
	}
	return ""
}

// LimitsOf is the limits of the active key with this id, from memory (false when none is).
func (s *Service) LimitsOf(id int64) (spend.Limits, bool) {
	if e := s.entryOf(id); e != nil {
		return e.Limits, true
	}
	return spend.Limits{}, false
}

// entryOf is the active key with this id, nil when none is.
func (s *Service) entryOf(id int64) *entry {
	for _, e := range *s.active.Load() {
		if e.KeyID == id {
			return e
		}
	}
	return nil
}

// Revoke disables a key at once.
func (s *Service) Revoke(ctx context.Context, id int64) error {
	s.mu.Lock()
	defer s.unlock()
	if err := db.RevokeClientKey(ctx, s.db.W, id); err != nil {
		if err == db.ErrNotFound {
			return errs.New(errs.NotFound, "err.key_not_found", id)
		}
		return err
	}
	s.commits.Mark()
	if err := s.reload(ctx); err != nil {
		return err
	}
	s.notify(ctx, id, nil, false)
	return nil
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
		out[i] = s.view(r)
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

// view is the public form of a row. allowed_connections shows only connections that still
// exist: ids are never reused, so the stored id of a deleted connection names nothing.
func (s *Service) view(r db.ClientKey) Key {
	k := Key{ID: r.ID, Name: r.Name, Prefix: r.Prefix, CreatedAt: r.CreatedAt,
		AllowedModels: []string{}, Scopes: []string{}, AllowedConnections: []int64{}}
	if r.LastUsedAt.Valid {
		v := r.LastUsedAt.Int64
		k.LastUsedAt = &v
	}
	if r.RevokedAt.Valid {
		v := r.RevokedAt.Int64
		k.RevokedAt = &v
	}
	_ = json.Unmarshal([]byte(r.AllowedModels), &k.AllowedModels)
	_ = json.Unmarshal([]byte(r.Scopes), &k.Scopes)
	k.Limits = decodeLimits(r.Limits)
	var conns []int64
	_ = json.Unmarshal([]byte(r.AllowedConnections), &conns)
	for _, id := range conns {
		if s.exists(id) {
			k.AllowedConnections = append(k.AllowedConnections, id)
		}
	}
	return k
}

// keyHash is the SHA-256 of a client key, the key of the active-key table.
type keyHash [sha256.Size]byte

// parseKeyHash reads a stored key hash (secrets.SHA256Hex: 64 hex digits).
func parseKeyHash(stored string) (keyHash, bool) {
	var h keyHash
	n, err := hex.Decode(h[:], []byte(stored))
	return h, err == nil && n == len(h) && len(stored) == 2*len(h)
}

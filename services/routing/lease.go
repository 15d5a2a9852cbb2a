package routing

// Exclusive session leases: a client key with the scope lease:exclusive takes one of its allowed
// connections for itself (an agent session that must stay on one account, say) and holds it
// until the lease expires or is released; requests of everybody else keep off that connection.
// SQLite decides who gets a connection (two UNIQUE constraints, inside one transaction); the
// engine reads the in-memory table, reloaded after every committed change, never SQLite.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/db"
	"switchyard/services/errs"
	"switchyard/services/secrets"
)

// OwnerPrefix starts every lease owner token: "swl_" and 43 base64url characters (32 random
// bytes). Only the token's SHA-256 is stored.
const OwnerPrefix = "swl_"

// ownerLen is the length of an owner token.
const ownerLen = len(OwnerPrefix) + 43

// The bounds of a lease's time to live (ttl_ms): a request without one gets DefaultLeaseTTL, any
// other value is clamped to MinLeaseTTL–MaxLeaseTTL.
const (
	DefaultLeaseTTL = 10 * time.Minute
	MinLeaseTTL     = 30 * time.Second
	MaxLeaseTTL     = 24 * time.Hour
)

// MaxLeaseRetryAfter bounds the Retry-After of a lease_capacity answer: the earliest expiry of a
// lease in the way, at least one second, at most five minutes (a lease is usually renewed before
// it expires, so a client should look again well before a long lease's end).
const MaxLeaseRetryAfter = 5 * time.Minute

// LeaseRetryAfter is the Retry-After for a wait until a lease expires: clamped to 1 s–5 min.
func LeaseRetryAfter(d time.Duration) time.Duration {
	return min(max(d, time.Second), MaxLeaseRetryAfter)
}

// Lease is one lease as the engine reads it.
type Lease struct {
	ID           int64
	ConnectionID int64
	// Owner is the SHA-256 of the owner token.
	Owner       [32]byte
	ClientKeyID int64
	// Generation counts the acquisitions of this owner token; requests send the current one.
	Generation int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
}

// Active reports whether the lease still holds its connection at now.
func (l Lease) Active(now time.Time) bool { return now.Before(l.ExpiresAt) }

// LeaseConnection is what the lease service needs to know of a connection.
type LeaseConnection struct {
	ID int64
	// Name is the connection as clients may read it (never an account's e-mail).
	Name     string
	Provider string
	// Usable: enabled, and its credential opens; only usable connections are leased.
	Usable bool
	// Healthy: not cooling and not in a terminal state now; healthy connections are leased first.
	Healthy  bool
	Priority int
}

// ConnectionSource looks a connection up (the catalog's registry and the live state).
type ConnectionSource func(id int64) (LeaseConnection, bool)

// Holder is the client key that asks for a lease: its id, whether it has the scope
// lease:exclusive, and the connections it may lease.
type Holder struct {
	KeyID       int64
	Exclusive   bool
	Connections []int64
}

// AcquireInput is an acquire request. Owner re-acquires with a token this key holds (the lease
// moves on with a new generation); Connection asks for one connection of the allowed ones;
// TTL 0 is the default.
type AcquireInput struct {
	Owner      string
	Connection int64
	TTL        time.Duration
}

// Granted is a lease as its holder sees it. Owner is set only in the answer to an acquire.
type Granted struct {
	Owner      string      `json:"owner,omitempty"`
	Generation int64       `json:"generation"`
	Connection GrantedConn `json:"connection"`
	AcquiredAt time.Time   `json:"acquired_at"`
	ExpiresAt  time.Time   `json:"expires_at"`
	// TTLMS is the time to live granted by this acquire or renew, after the bounds.
	TTLMS    int64 `json:"ttl_ms,omitempty"`
	Released bool  `json:"released,omitempty"`
}

// GrantedConn is the leased connection.
type GrantedConn struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Provider string `json:"provider"`
}

// Leases grants, renews and releases leases and keeps the in-memory table the engine reads.
type Leases struct {
	db    *db.DB
	now   func() time.Time
	conns ConnectionSource
	log   *slog.Logger

	table  atomic.Pointer[leaseTable]
	loadMu sync.Mutex // orders reloads: the last one reads the latest committed state

	// committed are the OnCommitted functions, guarded by commitMu.
	commitMu  sync.Mutex
	committed []func(topic string)
}

// LeaseTopic names the session leases to the replicas that share their database: a committed
// acquire, renew or release is announced under it (OnCommitted), and a replica that hears it
// calls Reload, so that every replica's engine keeps a leased connection for its owner.
const LeaseTopic = "session-leases"

// OnCommitted registers fn to run with LeaseTopic after every committed change of the leases.
func (l *Leases) OnCommitted(fn func(topic string)) {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	l.committed = append(l.committed, fn)
}

// Reload reads every lease again (another replica changed them).
func (l *Leases) Reload(ctx context.Context) error { return l.reload(ctx) }

// leaseTable is an immutable snapshot of every lease row (expired ones included, so their
// owners can be told they expired).
type leaseTable struct {
	byConn  map[int64]*Lease
	byOwner map[[32]byte]*Lease
}

// NewLeases loads the leases into memory.
func NewLeases(ctx context.Context, d *db.DB, conns ConnectionSource, now func() time.Time, log *slog.Logger) (*Leases, error) {
	l := &Leases{db: d, now: now, conns: conns, log: log}
	if err := l.reload(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// reload reads every lease row into a new table. Reloads run one at a time and each reads what
// was committed before it, so after the last one the table is the database's.
func (l *Leases) reload(ctx context.Context) error {
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	rows, err := db.ListSessionLeases(ctx, l.db.W)
	if err != nil {
		return err
	}
	t := &leaseTable{byConn: make(map[int64]*Lease, len(rows)), byOwner: make(map[[32]byte]*Lease, len(rows))}
	for _, r := range rows {
		var owner [32]byte
		if b, err := hex.DecodeString(r.OwnerHash); err == nil && len(b) == len(owner) {
			copy(owner[:], b)
		}
		x := &Lease{ID: r.ID, ConnectionID: r.ConnectionID, Owner: owner, ClientKeyID: r.ClientKeyID, Generation: r.Generation,
			AcquiredAt: time.UnixMilli(r.AcquiredAt), ExpiresAt: time.UnixMilli(r.ExpiresAt)}
		t.byConn[x.ConnectionID] = x
		t.byOwner[owner] = x
	}
	l.table.Store(t)
	return nil
}

// refresh reloads after a committed change; a failed reload is logged (the next one catches up).
func (l *Leases) refresh(ctx context.Context) {
	if err := l.reload(context.WithoutCancel(ctx)); err != nil {
		l.log.Error("reload session leases", "error", err)
	}
	l.commitMu.Lock()
	fns := l.committed
	l.commitMu.Unlock()
	for _, fn := range fns {
		fn(LeaseTopic)
	}
}

// Held returns the lease on a connection, expired or not; the caller compares ExpiresAt with its
// clock. It reads memory only and costs one map lookup (none while nothing is leased).
func (l *Leases) Held(connID int64) (Lease, bool) {
	t := l.table.Load()
	if len(t.byConn) == 0 {
		return Lease{}, false
	}
	x, ok := t.byConn[connID]
	if !ok {
		return Lease{}, false
	}
	return *x, true
}

// ByOwner returns the lease of an owner token, expired or not.
func (l *Leases) ByOwner(token string) (Lease, bool) {
	t := l.table.Load()
	if len(t.byOwner) == 0 || !ValidOwner(token) {
		return Lease{}, false
	}
	x, ok := t.byOwner[sha256.Sum256([]byte(token))]
	if !ok {
		return Lease{}, false
	}
	return *x, true
}

// ValidOwner reports whether a string has the shape of an owner token.
func ValidOwner(token string) bool {
	if len(token) != ownerLen || !strings.HasPrefix(token, OwnerPrefix) {
		return false
	}
	for i := len(OwnerPrefix); i < len(token); i++ {
		c := token[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ownerHash is the stored form of an owner token.
func ownerHash(token string) string { return secrets.SHA256Hex(token) }

// clampTTL applies the default and the bounds.
func clampTTL(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultLeaseTTL
	}
	return min(max(d, MinLeaseTTL), MaxLeaseTTL)
}

// Acquire gives the holder one of its allowed connections for itself: the one asked for, else
// the first free one (healthy ones first, then by priority). Only a key with the scope
// lease:exclusive may. In one transaction: a lease whose time ran out is cleared off each
// candidate, then the insert is tried; the UNIQUE constraints on connection and owner refuse a
// connection somebody holds, whatever runs at the same time. Re-acquiring with an owner token the
// key holds moves that owner's lease (its own connection first) under a new generation, so
// requests still sending the old one are refused; when nothing is free it keeps the lease it had.
func (l *Leases) Acquire(ctx context.Context, h Holder, in AcquireInput) (Granted, error) {
	if !h.Exclusive {
		return Granted{}, leaseErr(errs.Forbidden, "lease_not_allowed", "lease.err.not_allowed", "lease:exclusive")
	}
	if in.Owner != "" && !ValidOwner(in.Owner) {
		return Granted{}, badOwner()
	}
	cands, err := l.candidates(h, in.Connection)
	if err != nil {
		return Granted{}, err
	}
	ttl := clampTTL(in.TTL)
	now := l.now()
	token := in.Owner
	if token == "" {
		token = OwnerPrefix + secrets.RandomToken(32)
	}
	hash := ownerHash(token)
	var got db.SessionLease
	var conn LeaseConnection
	err = l.db.WithTx(ctx, func(tx *db.Tx) error {
		gen := int64(1)
		if in.Owner != "" {
			prev, err := db.SessionLeaseByOwner(ctx, tx, hash)
			if err == db.ErrNotFound || err == nil && prev.ClientKeyID != h.KeyID {
				return leaseNotFound()
			}
			if err != nil {
				return err
			}
			gen = prev.Generation + 1
			if in.Connection == 0 {
				cands = ownFirst(cands, prev.ConnectionID)
			}
			if err := db.DeleteSessionLease(ctx, tx, prev.ID); err != nil {
				return err
			}
		}
		for _, c := range cands {
			if err := db.DeleteExpiredSessionLease(ctx, tx, c.ID, now.UnixMilli()); err != nil {
				return err
			}
			row := db.SessionLease{ConnectionID: c.ID, OwnerHash: hash, ClientKeyID: h.KeyID, Generation: gen,
				AcquiredAt: now.UnixMilli(), ExpiresAt: now.Add(ttl).UnixMilli()}
			switch err := db.InsertSessionLease(ctx, tx, &row); {
			case err == db.ErrConflict:
				continue // held by another owner: the constraint said so
			case err != nil:
				return err
			}
			got, conn = row, c
			return nil
		}
		ids := make([]int64, len(cands))
		for i, c := range cands {
			ids[i] = c.ID
		}
		at, ok, err := db.EarliestSessionLeaseExpiry(ctx, tx, ids, now.UnixMilli())
		if err != nil {
			return err
		}
		wait := time.Second
		if ok {
			wait = time.UnixMilli(at).Sub(now)
		}
		return capacity(len(cands), wait) // rolls back: a re-acquiring owner keeps its lease
	})
	if err != nil {
		return Granted{}, err
	}
	l.refresh(ctx)
	g := granted(got, conn)
	g.Owner, g.TTLMS = token, ttl.Milliseconds()
	return g, nil
}

// candidates are the connections an acquire may take, in the order to try them.
func (l *Leases) candidates(h Holder, asked int64) ([]LeaseConnection, error) {
	if asked != 0 {
		if !contains(h.Connections, asked) {
			return nil, leaseErr(errs.Forbidden, "lease_connection_not_allowed", "lease.err.connection_not_allowed", asked)
		}
		c, ok := l.conns(asked)
		if !ok || !c.Usable {
			return nil, leaseErr(errs.Conflict, "lease_connection_unavailable", "lease.err.connection_unavailable", asked)
		}
		return []LeaseConnection{c}, nil
	}
	var out []LeaseConnection
	for _, id := range h.Connections {
		if c, ok := l.conns(id); ok && c.Usable {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, leaseErr(errs.Conflict, "lease_connection_unavailable", "lease.err.none_usable")
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Healthy != out[j].Healthy {
			return out[i].Healthy
		}
		if out[i].Priority != out[j].Priority {
			return out[i].Priority < out[j].Priority
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// ownFirst moves the owner's current connection to the front, when it is a candidate.
func ownFirst(cands []LeaseConnection, id int64) []LeaseConnection {
	for i, c := range cands {
		if c.ID == id {
			out := append([]LeaseConnection{c}, cands[:i]...)
			return append(out, cands[i+1:]...)
		}
	}
	return cands
}

// Renew extends a lease the holder owns to now + ttl (0: the default); the generation stays.
// An unknown token (never issued, released, taken over after it expired, or another key's) is
// 404 lease_not_found; a lease whose time ran out is 409 lease_expired and must be acquired again.
func (l *Leases) Renew(ctx context.Context, h Holder, owner string, ttl time.Duration) (Granted, error) {
	if !ValidOwner(owner) {
		return Granted{}, badOwner()
	}
	ttl = clampTTL(ttl)
	now := l.now()
	var row db.SessionLease
	err := l.db.WithTx(ctx, func(tx *db.Tx) error {
		var err error
		row, err = l.owned(ctx, tx, h, owner)
		if err != nil {
			return err
		}
		if row.ExpiresAt <= now.UnixMilli() {
			return leaseErr(errs.Conflict, "lease_expired", "lease.err.expired")
		}
		row.ExpiresAt = now.Add(ttl).UnixMilli()
		return db.RenewSessionLease(ctx, tx, row.ID, row.ExpiresAt)
	})
	if err != nil {
		return Granted{}, err
	}
	l.refresh(ctx)
	conn, _ := l.conns(row.ConnectionID)
	g := granted(row, conn)
	g.TTLMS = ttl.Milliseconds()
	return g, nil
}

// Release frees the holder's lease at once (also one that already expired); an unknown token is
// 404 lease_not_found.
func (l *Leases) Release(ctx context.Context, h Holder, owner string) (Granted, error) {
	if !ValidOwner(owner) {
		return Granted{}, badOwner()
	}
	var row db.SessionLease
	err := l.db.WithTx(ctx, func(tx *db.Tx) error {
		var err error
		if row, err = l.owned(ctx, tx, h, owner); err != nil {
			return err
		}
		return db.DeleteSessionLease(ctx, tx, row.ID)
	})
	if err != nil {
		return Granted{}, err
	}
	l.refresh(ctx)
	conn, _ := l.conns(row.ConnectionID)
	g := granted(row, conn)
	g.Released = true
	return g, nil
}

// owned reads the holder's lease of an owner token; another key's is as unknown as none.
func (l *Leases) owned(ctx context.Context, q db.Querier, h Holder, owner string) (db.SessionLease, error) {
	row, err := db.SessionLeaseByOwner(ctx, q, ownerHash(owner))
	if err == db.ErrNotFound || err == nil && row.ClientKeyID != h.KeyID {
		return db.SessionLease{}, leaseNotFound()
	}
	return row, err
}

// KeyChanged releases the leases a client key may no longer hold: all of them when it was revoked
// or lost the scope lease:exclusive, else those on connections no longer in its list.
func (l *Leases) KeyChanged(ctx context.Context, keyID int64, active, exclusive bool, allowed []int64) {
	var keep []int64 // none: every lease of the key goes
	if active && exclusive {
		keep = allowed
	}
	if active && exclusive && len(keep) == 0 {
		return // cannot happen: the scope needs allowed connections
	}
	n, err := db.DeleteSessionLeasesOfKey(ctx, l.db.W, keyID, keep)
	if err != nil {
		l.log.Error("release the leases of a changed client key", "key_id", keyID, "error", err)
		return
	}
	if n > 0 {
		l.log.Info("released the leases a client key may no longer hold", "key_id", keyID, "count", n)
		l.refresh(ctx)
	}
}

// ForgetConnection drops a deleted connection's lease from memory (the database dropped its row
// with the connection).
func (l *Leases) ForgetConnection(int64) { l.refresh(context.Background()) }

func granted(r db.SessionLease, c LeaseConnection) Granted {
	return Granted{Generation: r.Generation, Connection: GrantedConn{ID: r.ConnectionID, Name: c.Name, Provider: c.Provider},
		AcquiredAt: time.UnixMilli(r.AcquiredAt).UTC(), ExpiresAt: time.UnixMilli(r.ExpiresAt).UTC()}
}

func contains(list []int64, id int64) bool {
	for _, x := range list {
		if x == id {
			return true
		}
	}
	return false
}

func leaseErr(code errs.Code, reason, key string, args ...any) *errs.Error {
	return &errs.Error{Code: code, Reason: reason, Msg: errs.M(key, args...)}
}

func leaseNotFound() *errs.Error {
	return leaseErr(errs.NotFound, "lease_not_found", "lease.err.not_found")
}

func badOwner() *errs.Error {
	e := leaseErr(errs.Invalid, "invalid_request", "lease.err.owner_shape", OwnerPrefix)
	e.Status = 400
	return e
}

// capacity is the answer when every connection the key may lease is held by another owner.
func capacity(n int, wait time.Duration) *errs.Error {
	wait = LeaseRetryAfter(wait)
	e := leaseErr(errs.RateLimited, "lease_capacity", "lease.err.capacity", n, int64((wait+time.Second-1)/time.Second))
	e.RetryAfter = wait
	return e
}

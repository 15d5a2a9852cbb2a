package catalog

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"

	"switchyard/db"
)

// Topic names the catalog to the replicas that share its database: a committed write is
// announced under it (OnCommitted), and a replica that hears it calls Reload.
const Topic = "catalog"

// loaded are the provider and connection rows a registry was built from.
type loaded struct {
	provs []db.Provider
	conns []db.Connection
}

// same reports whether two reads found the same rows. Every write stamps updated_at and a new
// credential is sealed afresh, so equal rows mean nothing changed.
func (l loaded) same(o loaded) bool {
	return slices.Equal(l.provs, o.provs) && reflect.DeepEqual(l.conns, o.conns)
}

// OnCommitted registers fn to run after every write of the catalog that committed: operator
// changes, signed-in accounts and refreshed OAuth token pairs, each with Topic. It runs once the
// write lock is released, so fn may call back into the service; it should hand the topic on
// quickly. The renaming New may have committed happened before anything could register, so fn
// hears of it at once when it registers. Registering never replaces an earlier fn.
func (s *Service) OnCommitted(fn func(topic string)) {
	s.mu.Lock()
	s.commits.On(fn)
	renamed := s.renamed
	s.mu.Unlock()
	if renamed {
		fn(Topic)
	}
}

// commit runs fn in one transaction and records that a write committed; s.mu is held.
func (s *Service) commit(ctx context.Context, fn func(tx *db.Tx) error) error {
	if err := s.db.WithTx(ctx, fn); err != nil {
		return err
	}
	s.commits.Mark()
	return nil
}

// unlock releases s.mu and then, when a write committed while it was held, calls the
// OnCommitted functions: whatever the local rebuild and hooks did, the database changed.
func (s *Service) unlock() { s.commits.Unlock(&s.mu) }

// Reload re-reads every provider and connection (another replica changed them) and applies
// what changed as the local write would have: a new registry is published (OnChange), the
// deletion hooks run for every connection that is gone, and the new-credential hooks for every
// connection that got a new API key, sign-in or pasted token. A token pair another replica
// refreshed reaches the registry (and through it the token holder) but is no new credential.
// When nothing changed, nothing is published and no hook runs. Reload is safe beside requests
// (they read the published registry) and local writes (it takes the same lock). The registry is
// swapped even when a new-credential hook fails; the hooks' errors are returned together.
func (s *Service) Reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := s.read(ctx)
	if err != nil {
		return err
	}
	if rows.same(s.rows) {
		return nil
	}
	before, old := s.reg.Load(), s.rows
	s.swap(rows)
	s.notifyDeleted(before)
	var failed []error
	for _, id := range newCredentials(old.conns, rows.conns, before, s.reg.Load()) {
		for _, fn := range s.newCreds {
			if err := fn(ctx, id); err != nil {
				failed = append(failed, err)
			}
		}
	}
	return errors.Join(failed...)
}

// newCredentials lists the connections (in both reads) whose credential was replaced between
// them, leaving out OAuth token pairs that were only refreshed (same grant before and after).
func newCredentials(old, cur []db.Connection, before, after *Registry) []int64 {
	prev := make(map[int64][]byte, len(old))
	for _, c := range old {
		prev[c.ID] = c.Secret
	}
	var out []int64
	for _, c := range cur {
		secret, ok := prev[c.ID]
		if !ok || bytes.Equal(secret, c.Secret) {
			continue
		}
		b, wasKnown := before.Connection(c.ID)
		a, isKnown := after.Connection(c.ID)
		if wasKnown && isKnown && b.OAuth != nil && a.OAuth != nil && b.OAuth.grant == a.OAuth.grant {
			continue // a refresh: the same grant's next pair
		}
		out = append(out, c.ID)
	}
	return out
}

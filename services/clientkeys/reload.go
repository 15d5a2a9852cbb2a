package clientkeys

import "context"

// Topic names the client keys to the replicas that share their database: a committed write is
// announced under it (OnCommitted), and a replica that hears it calls Reload.
const Topic = "keys"

// OnCommitted registers fn to run after every committed create, change or revocation of a key,
// with Topic. Last-used times are not announced: they are no configuration. fn runs once the
// write lock is released, so it may call back into the service; it should hand the topic on
// quickly. Registering never replaces an earlier fn.
func (s *Service) OnCommitted(fn func(topic string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits.On(fn)
}

// unlock releases s.mu and then, when a write committed while it was held, calls the
// OnCommitted functions.
func (s *Service) unlock() { s.commits.Unlock(&s.mu) }

// Reload re-reads every key (another replica changed them) and applies what changed as the
// local write would have: a key revoked there is refused here from now on and the change hooks
// hear it (active false); a key whose name, access lists or limits changed there gets its new
// Identity and the hooks hear it (active true); a new key is accepted. Unchanged keys keep
// their entries and pending last-used times, and when nothing changed no hook runs. Reload is
// safe beside requests (they read the published table) and local writes (it takes their lock).
func (s *Service) Reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.active.Load()
	if err := s.reload(ctx); err != nil {
		return err
	}
	after := s.active.Load()
	for hash, old := range *before {
		e, ok := (*after)[hash]
		switch {
		case !ok:
			s.notify(ctx, old.KeyID, nil, false)
		case e != old: // reload keeps the entry of an unchanged key
			s.notify(ctx, e.KeyID, e.Access, true)
		}
	}
	return nil
}

package spend

import (
	"context"
	"fmt"
)

// Topic names the prices settings (the document and the webhook secret) to the replicas that
// share their store: a committed write is announced under it (OnCommitted), and a replica that
// hears it calls Reload.
const Topic = "prices"

// OnCommitted registers fn to run after every committed save of the document and every
// rotation of the webhook secret, with Topic. It runs once the lock is released, so fn may call
// back into the service; it should hand the topic on quickly. NewPriceService saves a secret
// when the store has none it can open, before anything could register: fn hears of that at
// once when it registers. Registering never replaces an earlier fn.
func (s *PriceService) OnCommitted(fn func(topic string)) {
	s.mu.Lock()
	s.committed = append(s.committed, fn)
	made := s.madeSecret
	s.mu.Unlock()
	if made {
		fn(Topic)
	}
}

// Reload re-reads the document and the webhook secret (another replica saved them) and
// publishes what changed, as the local write would have: a new document is billed with from the
// next request and the OnChange functions run; a rotated secret signs the next webhooks (no
// OnChange, as for a rotation here). When nothing changed, nothing is published and nothing
// runs. Saved values that no longer validate are skipped, as at the start. A stored secret that
// cannot be opened is an error and the current one stays in use: unlike the start, a reload
// never writes. Reload is safe beside requests (they read the published snapshot) and saves (it
// takes their lock).
func (s *PriceService) Reload(ctx context.Context) error {
	changed, err := s.reload(ctx)
	s.after(changed, false)
	return err
}

// reload is Reload under the lock; it reports whether the document changed.
func (s *PriceService) reload(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed, err := s.refreshDoc(ctx)
	if err != nil {
		return false, err
	}
	return changed, s.refreshSecret(ctx)
}

// refreshDoc reads the saved document and publishes it when it differs from the current one;
// it reports whether it did. s.mu is held.
func (s *PriceService) refreshDoc(ctx context.Context) (bool, error) {
	cur := s.state.Load()
	raw, ok, err := s.store.GetValue(ctx, PricesKey)
	if err != nil {
		return false, fmt.Errorf("prices: load: %w", err)
	}
	doc := &PricesDoc{Models: map[string]ModelPrice{}, TimeZone: DefaultTimeZone,
		BudgetWebhookSecretSet: cur.doc.BudgetWebhookSecretSet}
	if ok {
		loadSaved(raw, doc)
	}
	if sameDoc(doc, cur.doc) {
		return false, nil
	}
	st, err := s.build(doc, cur.secret)
	if err != nil {
		return false, err
	}
	st.sealed = cur.sealed
	s.state.Store(st)
	return true, nil
}

// refreshSecret reads the saved webhook secret and uses it when it was rotated. s.mu is held.
func (s *PriceService) refreshSecret(ctx context.Context) error {
	raw, ok, err := s.store.GetValue(ctx, webhookSecretKey)
	if err != nil {
		return fmt.Errorf("prices: load webhook secret: %w", err)
	}
	if !ok || raw == s.state.Load().sealed {
		return nil
	}
	secret, err := s.openSecret(raw)
	if err != nil {
		return fmt.Errorf("prices: the saved budget webhook secret cannot be opened; the one in use stays: %w", err)
	}
	s.useSecret(secret, raw)
	return nil
}

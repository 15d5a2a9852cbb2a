// Package auth guards the dashboard and the admin API: the admin password (only its hash is
// stored), the optional automation token, and a limiter against password guessing.
package auth

import (
	"context"
	"crypto/subtle"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"switchyard/services/secrets"
)

const passwordKey = "admin.password_hash"

// Store is the key/value persistence auth needs.
type Store interface {
	GetValue(ctx context.Context, key string) (string, bool, error)
	PutValue(ctx context.Context, key, value string) error
}

// Service checks admin credentials.
type Service struct {
	store Store
	token string // SWITCHYARD_ADMIN_TOKEN; "" = token access off

	mu       sync.Mutex
	hash     string
	limiters map[string]*limiterEntry
	now      func() time.Time
}

type limiterEntry struct {
	lim  *rate.Limiter
	seen time.Time
}

// Init prepares the admin password: envPassword (when set) replaces the stored hash; with no
// stored hash and no env password a random one is generated and returned so the caller can
// print it once. Only the hash is ever stored.
func Init(ctx context.Context, store Store, envPassword, adminToken string, now func() time.Time) (s *Service, generated string, err error) {
	s = &Service{store: store, token: adminToken, limiters: map[string]*limiterEntry{}, now: now}
	hash, ok, err := store.GetValue(ctx, passwordKey)
	if err != nil {
		return nil, "", err
	}
	switch {
	case envPassword != "":
		if !ok || !secrets.CheckPassword(hash, envPassword) {
			if hash, err = secrets.HashPassword(envPassword); err != nil {
				return nil, "", err
			}
			if err := store.PutValue(ctx, passwordKey, hash); err != nil {
				return nil, "", fmt.Errorf("store admin password: %w", err)
			}
		}
	case !ok:
		generated = secrets.RandomToken(12)
		if hash, err = secrets.HashPassword(generated); err != nil {
			return nil, "", err
		}
		if err := store.PutValue(ctx, passwordKey, hash); err != nil {
			return nil, "", fmt.Errorf("store admin password: %w", err)
		}
	}
	s.hash = hash
	return s, generated, nil
}

// CheckPassword reports whether pw is the admin password.
func (s *Service) CheckPassword(pw string) bool {
	s.mu.Lock()
	h := s.hash
	s.mu.Unlock()
	return secrets.CheckPassword(h, pw)
}

// CheckToken reports whether tok is the configured admin token (never true when none is set).
func (s *Service) CheckToken(tok string) bool {
	return s.token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) == 1
}

// TokenEnabled reports whether automation access with a bearer token is configured.
func (s *Service) TokenEnabled() bool { return s.token != "" }

// AllowLogin takes one login attempt from the client's budget: 5 attempts at once, then one
// every 12 seconds, per client address. The address must be one the client cannot choose (the
// edge believes forwarding headers only from trusted proxies).
func (s *Service) AllowLogin(client string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	// Forget idle clients so the map stays bounded.
	if len(s.limiters) > 10000 {
		for k, e := range s.limiters {
			if now.Sub(e.seen) > 10*time.Minute {
				delete(s.limiters, k)
			}
		}
	}
	e, ok := s.limiters[client]
	if !ok {
		e = &limiterEntry{lim: rate.NewLimiter(rate.Every(12*time.Second), 5)}
		s.limiters[client] = e
	}
	e.seen = now
	return e.lim.AllowN(now, 1)
}

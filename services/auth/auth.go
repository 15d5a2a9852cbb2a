// Package auth guards the dashboard and the admin API: the admin password (only its hash is
// stored), the optional automation token, and limiters against guessing passwords, tokens and
// client keys.
package auth

import (
	"context"
	"crypto/subtle"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

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

	mu   sync.Mutex
	hash string
	now  func() time.Time
	// logins budgets password attempts, credentials failed bearer-token and client-key checks.
	logins, credentials *throttle
}

// MinTokenLength is the shortest admin token accepted: a shorter one could be guessed.
const MinTokenLength = 16

// The throttles' budget per client address: ThrottleBurst attempts at once, then one every
// ThrottleInterval.
const (
	ThrottleBurst    = 5
	ThrottleInterval = 12 * time.Second
)

// CheckTokenStrength refuses an admin token shorter than MinTokenLength characters ("" = none
// set, allowed).
func CheckTokenStrength(token string) error {
	if n := utf8.RuneCountInString(token); token != "" && n < MinTokenLength {
		return fmt.Errorf("SWITCHYARD_ADMIN_TOKEN must be at least %d characters long, not %d (for example: openssl rand -hex 24)",
			MinTokenLength, n)
	}
	return nil
}

// Init prepares the admin password: envPassword (when set) replaces the stored hash; with no
// stored hash and no env password a random one is generated and returned so the caller can
// print it once. Only the hash is ever stored. A set adminToken must pass CheckTokenStrength.
// now is the clock of the throttles.
func Init(ctx context.Context, store Store, envPassword, adminToken string, now func() time.Time) (s *Service, generated string, err error) {
	if err := CheckTokenStrength(adminToken); err != nil {
		return nil, "", err
	}
	s = &Service{store: store, token: adminToken, now: now,
		logins: newThrottle(ThrottleBurst, ThrottleInterval), credentials: newThrottle(ThrottleBurst, ThrottleInterval)}
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
// edge believes forwarding headers only from trusted proxies). Every attempt counts, taken before
// the password is even read.
func (s *Service) AllowLogin(client string) bool {
	return s.logins.take(client, s.now())
}

// CredentialWait says whether the client may have a bearer token or client key checked now: 0
// while its budget of failed checks lasts, else how long until it may try again. Its budget is
// that of the password login (a budget of its own): 5 failures at once, then one every 12 s.
func (s *Service) CredentialWait(client string) time.Duration {
	return s.credentials.wait(client, s.now)
}

// CredentialFailed spends one attempt of the client's budget for a bearer token or client key
// that did not check out. A successful check spends nothing.
func (s *Service) CredentialFailed(client string) {
	s.credentials.take(client, s.now())
}

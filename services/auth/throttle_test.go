package auth

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

type memStore map[string]string

func (m memStore) GetValue(_ context.Context, k string) (string, bool, error) {
	v, ok := m[k]
	return v, ok, nil
}

func (m memStore) PutValue(_ context.Context, k, v string) error { m[k] = v; return nil }

func newService(t *testing.T, now *time.Time) *Service {
	t.Helper()
	s, _, err := Init(context.Background(), memStore{}, "pw", "", func() time.Time { return *now })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLoginBudgetRefillsOneAttemptPerInterval(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newService(t, &now)
	for i := range ThrottleBurst {
		if !s.AllowLogin("192.0.2.1") {
			t.Fatalf("attempt %d refused within the burst", i)
		}
	}
	if s.AllowLogin("192.0.2.1") {
		t.Fatal("attempt past the burst allowed")
	}
	if !s.AllowLogin("192.0.2.2") {
		t.Fatal("another address was throttled")
	}
	now = now.Add(ThrottleInterval)
	if !s.AllowLogin("192.0.2.1") || s.AllowLogin("192.0.2.1") {
		t.Fatal("one interval later exactly one attempt is allowed")
	}
}

func TestCredentialBudgetCountsOnlyFailures(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newService(t, &now)
	for range 50 { // successful checks only ask
		if w := s.CredentialWait("198.51.100.9"); w != 0 {
			t.Fatalf("asking spent the budget: wait %v", w)
		}
	}
	for i := range ThrottleBurst {
		if w := s.CredentialWait("198.51.100.9"); w != 0 {
			t.Fatalf("failure %d: wait %v within the burst", i, w)
		}
		s.CredentialFailed("198.51.100.9")
	}
	if w := s.CredentialWait("198.51.100.9"); w != ThrottleInterval {
		t.Fatalf("after the burst: wait %v, want %v", w, ThrottleInterval)
	}
	now = now.Add(5 * time.Second)
	if w := s.CredentialWait("198.51.100.9"); w != 7*time.Second {
		t.Fatalf("5 s later: wait %v, want 7s", w)
	}
	if s.AllowLogin("198.51.100.9") == false {
		t.Fatal("failed token checks spent the password login's budget")
	}
	now = now.Add(7 * time.Second)
	if w := s.CredentialWait("198.51.100.9"); w != 0 {
		t.Fatalf("after the interval: wait %v", w)
	}
}

// An IPv6 host can take any address of its /64: all of them share one budget.
func TestIPv6ClientsAreTheirSlash64(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newService(t, &now)
	for i := range ThrottleBurst + 3 {
		s.CredentialFailed(fmt.Sprintf("2001:db8:1:2::%x", i+1))
	}
	if s.CredentialWait("2001:db8:1:2:ffff::1") == 0 {
		t.Fatal("a new address in the same /64 has a fresh budget")
	}
	if s.CredentialWait("2001:db8:1:3::1") != 0 {
		t.Fatal("another /64 was throttled")
	}
	if s.CredentialWait("::ffff:192.0.2.7") != 0 || clientNetwork("::ffff:192.0.2.7") != "192.0.2.7" {
		t.Fatal("an IPv4-mapped address is not its IPv4 address")
	}
}

// The table forgets clients whose budget is full again, so cycling through addresses cannot
// grow it without bound, and forgetting them changes nothing.
func TestThrottleForgetsRefilledClients(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newService(t, &now)
	for i := range 5000 {
		s.CredentialFailed(fmt.Sprintf("10.%d.%d.1", i/256, i%256))
	}
	s.CredentialFailed("192.0.2.50")
	s.CredentialFailed("192.0.2.50")
	now = now.Add(ThrottleBurst * ThrottleInterval)
	s.CredentialFailed("192.0.2.99")
	if n := len(s.credentials.clients); n > 2 {
		t.Fatalf("%d clients kept after every budget refilled", n)
	}
	for range ThrottleBurst {
		if s.CredentialWait("192.0.2.50") != 0 {
			t.Fatal("a forgotten client came back with less than a full budget")
		}
		s.CredentialFailed("192.0.2.50")
	}
}

func TestAdminTokenMustBeLongEnough(t *testing.T) {
	for _, tok := range []string{"", strings.Repeat("x", MinTokenLength), "äöüäöüäöüäöüäöüä"} {
		if err := CheckTokenStrength(tok); err != nil {
			t.Errorf("%q: %v", tok, err)
		}
	}
	err := CheckTokenStrength("my-admin-token")
	if err == nil || !strings.Contains(err.Error(), "at least 16 characters") {
		t.Fatalf("a 14-character token: %v", err)
	}
	if _, _, err := Init(context.Background(), memStore{}, "pw", "short", time.Now); err == nil {
		t.Fatal("Init accepted a short token")
	}
}

package resilience

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// Replayed reasoning a connection cannot read. A client sends the model's reasoning back with
// every later request of a conversation (Responses reasoning items with their encrypted content,
// thinking blocks with their signatures), and an upstream refuses the whole request when it
// cannot read one: another organisation's sealed reasoning, another model's signature. The
// engine then leaves the reasoning out and asks again (services/proxy/replay.go); what it left
// out is remembered here, by the seal's digest, for the connection and model that refused it,
// so the conversation's later requests go to that connection without it at once instead of
// being refused once each. Persisted through the state store and shared with the other
// replicas, as the stored pins are: a seal remembered is written, a use only moves it up in
// memory.

const (
	// ReplayMemoryTTL is how long a seal is remembered after it was last seen.
	ReplayMemoryTTL = 7 * 24 * time.Hour
	// MaxReplayMemory bounds the seals remembered (about 300 bytes each).
	MaxReplayMemory = 100_000
)

// SealDigest is a seal's digest (the first 16 bytes of its SHA-256): the memory and the store
// keep no reasoning. It is written as hex.
type SealDigest [16]byte

func sealDigest(seal string) (d SealDigest) {
	sum := sha256.Sum256([]byte(seal))
	copy(d[:], sum[:])
	return d
}

// MarshalText writes the digest as hex.
func (d SealDigest) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, d[:]), nil }

// UnmarshalText reads the hex of MarshalText.
func (d *SealDigest) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(d) {
		return fmt.Errorf("seal digest: %d hex digits, want %d", len(b), 2*len(d))
	}
	_, err := hex.Decode(d[:], b)
	return err
}

// ReplayKey is one seal a connection could not read with a model.
type ReplayKey struct {
	ConnectionID int64      `json:"connection_id"`
	Model        string     `json:"model"`
	Seal         SealDigest `json:"seal"`
}

// ReplaySeal is a seal remembered, as it is persisted.
type ReplaySeal struct {
	ReplayKey
	SeenAt time.Time `json:"seen_at"`
}

func (r ReplaySeal) tableKey() ReplayKey { return r.ReplayKey }
func (r ReplaySeal) lastUse() time.Time  { return r.SeenAt }
func (r ReplaySeal) keyed(k ReplayKey) ReplaySeal {
	r.ReplayKey = k
	return r
}

// ReplayMemory remembers replayed reasoning connections refused; safe for concurrent use. Its
// Apply installs a seal another replica remembered (nil: it was forgotten).
type ReplayMemory struct {
	sharedTable[ReplayKey, ReplaySeal]
	perConn map[int64]int
	// held counts the seals, for Holds to answer without the lock while there are none.
	held atomic.Int64
}

// NewReplayMemory builds the memory, at most limit seals (MaxReplayMemory when ≤ 0). persist
// (may be nil) receives every seal remembered (a copy) and every seal forgotten (nil), and must
// not block: hand it to a write-behind queue.
func NewReplayMemory(clock clockwork.Clock, limit int, persist func(ReplayKey, *ReplaySeal)) *ReplayMemory {
	if limit <= 0 {
		limit = MaxReplayMemory
	}
	m := &ReplayMemory{sharedTable: newSharedTable(clock, ReplayMemoryTTL, limit, persist), perConn: map[int64]int{}}
	m.onAdd = func(e *ttlEntry[ReplayKey, ReplaySeal]) {
		m.perConn[e.key.ConnectionID]++
		m.held.Add(1)
	}
	m.onDrop = func(e *ttlEntry[ReplayKey, ReplaySeal]) {
		m.dropped(e)
		m.held.Add(-1)
		if n := m.perConn[e.key.ConnectionID] - 1; n > 0 {
			m.perConn[e.key.ConnectionID] = n
		} else {
			delete(m.perConn, e.key.ConnectionID)
		}
	}
	return m
}

// Record remembers that conn refused the reasoning of these seals with model ("" seals are
// passed over).
func (m *ReplayMemory) Record(conn int64, model string, seals []string) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range seals {
		if s == "" {
			continue
		}
		if k := (ReplayKey{conn, model, sealDigest(s)}); m.live(k, now) == nil {
			m.store(ReplaySeal{ReplayKey: k, SeenAt: now}, now)
		}
	}
}

// Holds reports whether anything is remembered for conn: a request to it is looked at only then.
func (m *ReplayMemory) Holds(conn int64) bool {
	if m.held.Load() == 0 {
		return false // the common case, on every request: no lock
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.perConn[conn] > 0
}

// Unreadable reports whether conn refused the reasoning of seal with model, and marks it seen.
func (m *ReplayMemory) Unreadable(conn int64, model, seal string) bool {
	if seal == "" {
		return false
	}
	k := ReplayKey{conn, model, sealDigest(seal)}
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live(k, now) != nil
}

// ForgetConnection drops what is remembered for conn: new credentials may be another
// organisation's, which reads other reasoning.
func (m *ReplayMemory) ForgetConnection(conn int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.perConn[conn] == 0 {
		return
	}
	for k, el := range m.t.byKey {
		if k.ConnectionID == conn {
			m.drop(el.Value.(*ttlEntry[ReplayKey, ReplaySeal]))
		}
	}
}

// Load installs seals read at start; expired ones are deleted from the store, and past the
// bound the most recently seen are kept.
func (m *ReplayMemory) Load(seals []ReplaySeal) { m.load(seals, nil) }

package resilience

import (
	"crypto/sha256"
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
// being refused once each. Held in memory only: after a restart the first refusal teaches it
// again.

const (
	// ReplayMemoryTTL is how long a seal is remembered after it was last seen.
	ReplayMemoryTTL = 7 * 24 * time.Hour
	// MaxReplayMemory bounds the seals remembered (about 150 bytes each).
	MaxReplayMemory = 100_000
)

// replayKey is one seal a connection could not read with a model.
type replayKey struct {
	conn  int64
	model string
	seal  [16]byte
}

// ReplayMemory remembers replayed reasoning connections refused; safe for concurrent use.
type ReplayMemory struct {
	sweptTable[replayKey, struct{}]
	perConn map[int64]int
	// held counts the seals, for Holds to answer without the lock while there are none.
	held atomic.Int64
}

// NewReplayMemory builds the memory, at most limit seals (MaxReplayMemory when ≤ 0).
func NewReplayMemory(clock clockwork.Clock, limit int) *ReplayMemory {
	if limit <= 0 {
		limit = MaxReplayMemory
	}
	m := &ReplayMemory{sweptTable: newSweptTable[replayKey, struct{}](clock, ReplayMemoryTTL, limit), perConn: map[int64]int{}}
	m.onDrop = func(e *ttlEntry[replayKey, struct{}]) {
		m.held.Add(-1)
		if n := m.perConn[e.key.conn] - 1; n > 0 {
			m.perConn[e.key.conn] = n
		} else {
			delete(m.perConn, e.key.conn)
		}
	}
	return m
}

func sealDigest(seal string) (d [16]byte) {
	sum := sha256.Sum256([]byte(seal))
	copy(d[:], sum[:])
	return d
}

// Record remembers that conn refused the reasoning of these seals with model ("" seals are
// passed over).
func (m *ReplayMemory) Record(conn int64, model string, seals []string) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range seals {
		if s != "" && m.put(replayKey{conn, model, sealDigest(s)}, struct{}{}, now) {
			m.perConn[conn]++
			m.held.Add(1)
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
	k := replayKey{conn, model, sealDigest(seal)}
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
		if k.conn == conn {
			m.drop(el.Value.(*ttlEntry[replayKey, struct{}]))
		}
	}
}

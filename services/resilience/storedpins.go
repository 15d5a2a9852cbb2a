package resilience

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Stored-state pins. OpenAI keeps what the Responses API answers (store, its default) for the
// organisation and project of the key that made it: a later request that names it — its
// previous_response_id, an item_reference or a reasoning item by id, a conversation — is
// answered only by a key of that organisation; any other answers "not found". A provider whose
// connections are keys of several organisations (or projects) must send such a request to the
// connection that made the state. The gateway remembers, per client key, which connection made
// (or was last seen to hold) each response, item and conversation id, and puts that connection
// first; when it does not know (the pin was evicted, the state was made with the key
// directly), the "not found" answer fails over to the next connection (CodeStoredStateMissing)
// and the one that holds the state is remembered once it answers.
//
// Unlike session pins these are on whatever session_affinity_ttl_ms says — they are about where
// state lives, not a preference. They are persisted through the state store and shared with the
// other replicas (a pin made or moved is written; a use only moves it up in memory, so after a
// restart a pin lasts StoredPinTTL from when it was made or moved).

const (
	// StoredPinTTL is how long an id stays pinned after its last use: OpenAI keeps stored
	// responses for 30 days.
	StoredPinTTL = 30 * 24 * time.Hour
	// MaxStoredPins bounds the table (about 250 bytes each): the least recently used go first.
	MaxStoredPins = 100_000
	// MaxStoredID is the longest id pinned; a longer value is no id of OpenAI's and is ignored.
	MaxStoredID = 128
)

// StoredKey is one pinned id: a response, item or conversation id as the client's key sent or
// received it (Namespace: the client key's id, so no client learns where another's state lives).
type StoredKey struct {
	Namespace int64  `json:"namespace"`
	ID        string `json:"id"`
}

// StoredPin is where an id's state lives; it is persisted.
type StoredPin struct {
	StoredKey
	Provider     string    `json:"provider"`
	ConnectionID int64     `json:"connection_id"`
	UsedAt       time.Time `json:"used_at"`
}

func (p StoredPin) tableKey() StoredKey { return p.StoredKey }
func (p StoredPin) lastUse() time.Time  { return p.UsedAt }
func (p StoredPin) keyed(k StoredKey) StoredPin {
	p.StoredKey = k
	return p
}

// StoredPins is the table of stored-state pins; safe for concurrent use. Its Apply installs a
// pin another replica recorded (nil: it ended).
type StoredPins struct {
	sharedTable[StoredKey, StoredPin]
}

// NewStoredPins builds the table, at most limit pins (MaxStoredPins when ≤ 0). persist (may be
// nil) receives every pin made or moved (a copy) and every pin dropped (nil), and must not block:
// hand it to a write-behind queue.
func NewStoredPins(clock clockwork.Clock, limit int, persist func(StoredKey, *StoredPin)) *StoredPins {
	if limit <= 0 {
		limit = MaxStoredPins
	}
	p := &StoredPins{sharedTable: newSharedTable(clock, StoredPinTTL, limit, persist)}
	p.onDrop = p.dropped
	return p
}

// Connection returns the connection of provider that holds the state of the first of ids it
// knows (the caller lists the most telling first), and marks that id used.
func (p *StoredPins) Connection(ns int64, provider string, ids []string) (int64, bool) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if e := p.live(StoredKey{ns, id}, now); e != nil && e.val.Provider == provider {
			return e.val.ConnectionID, true
		}
	}
	return 0, false
}

// Record pins ids to a connection of provider: it made them, or just answered a request that
// named them. A pin that already holds the connection is only marked used.
func (p *StoredPins) Record(ns int64, provider string, conn int64, ids []string) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if id == "" || len(id) > MaxStoredID {
			continue
		}
		k := StoredKey{ns, id}
		if e := p.live(k, now); e != nil && e.val.Provider == provider && e.val.ConnectionID == conn {
			continue
		}
		p.store(StoredPin{StoredKey: k, Provider: provider, ConnectionID: conn, UsedAt: now}, now)
	}
}

// Load installs pins read at start; expired ones are deleted from the store, and past the
// bound the most recently used are kept.
func (p *StoredPins) Load(ps []StoredPin) {
	p.load(ps, func(pin *StoredPin) bool { return pin.ID != "" })
}

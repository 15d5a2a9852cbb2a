package resilience

import (
	"slices"
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

// StoredPins is the table of stored-state pins; safe for concurrent use.
type StoredPins struct {
	sweptTable[StoredKey, StoredPin]
	persist func(StoredKey, *StoredPin)
	// quiet is set while records of other replicas are installed: what they drop is not
	// deleted from the store, whose rows belong to every replica. Guarded by mu.
	quiet bool
}

// NewStoredPins builds the table, at most limit pins (MaxStoredPins when ≤ 0). persist (may be
// nil) receives every pin made or moved (a copy) and every pin dropped (nil), and must not block:
// hand it to a write-behind queue.
func NewStoredPins(clock clockwork.Clock, limit int, persist func(StoredKey, *StoredPin)) *StoredPins {
	if limit <= 0 {
		limit = MaxStoredPins
	}
	p := &StoredPins{sweptTable: newSweptTable[StoredKey, StoredPin](clock, StoredPinTTL, limit), persist: orDrop2(persist)}
	p.onDrop = func(e *ttlEntry[StoredKey, StoredPin]) {
		if !p.quiet {
			p.persist(e.key, nil)
		}
	}
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
		pin := StoredPin{StoredKey: k, Provider: provider, ConnectionID: conn, UsedAt: now}
		p.put(k, pin, now)
		p.persist(k, &pin)
	}
}

// Load installs pins read at start; expired ones are deleted from the store, and past the bound
// the most recently used are kept.
func (p *StoredPins) Load(ps []StoredPin) {
	now := p.clock.Now()
	ps = slices.Clone(ps)
	slices.SortStableFunc(ps, func(a, b StoredPin) int { return a.UsedAt.Compare(b.UsedAt) })
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pin := range ps {
		if expired(pin.UsedAt, now, StoredPinTTL) || pin.ID == "" {
			p.persist(pin.StoredKey, nil)
			continue
		}
		p.t.set(pin.StoredKey, pin, pin.UsedAt)
	}
	for p.t.len() > p.t.limit {
		p.drop(p.t.oldest())
	}
}

// Apply installs a pin as another replica recorded it under k, or forgets k's pin when pin is
// nil, without persisting either.
func (p *StoredPins) Apply(k StoredKey, pin *StoredPin) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quiet = true
	defer func() { p.quiet = false }()
	if pin == nil {
		if e := p.t.get(k); e != nil {
			p.drop(e)
		}
		return
	}
	if k.ID == "" || expired(pin.UsedAt, now, StoredPinTTL) {
		return
	}
	v := *pin
	v.StoredKey = k
	p.put(k, v, now)
}

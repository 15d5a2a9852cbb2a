package resilience

import (
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
)

// Answer items: the output items of the Responses answers the gateway wrote itself, translated
// from an upstream that keeps no responses (chat completions, messages), so that a client's
// later request can name them by id (an item_reference, as the Vercel AI SDK sends each earlier
// answer with store on) and the gateway puts them back in its place. They hold conversation
// text, so they stay in memory only: a restart or another replica forgets them, and the client
// gets the gateway's "not held" answer as for any id it never saw.
const (
	// AnswerItemTTL is how long an item is kept after it was made or last named.
	AnswerItemTTL = 24 * time.Hour
	// MaxAnswerItems and MaxAnswerItemBytes bound the table: the least recently used go first.
	MaxAnswerItems     = 100_000
	MaxAnswerItemBytes = 64 << 20
)

// ItemKey is an item's id under the client key that was answered with it (0: no client key).
type ItemKey struct {
	ClientKeyID int64
	ID          string
}

// AnswerItems is the table of answer items, bounded by count and by bytes. Safe for concurrent
// use.
type AnswerItems struct {
	sweptTable[ItemKey, []byte]
	maxBytes int
	bytes    int // the raw items held, guarded by mu
}

// NewAnswerItems is an empty table whose items expire ttl after their last use.
func NewAnswerItems(clock clockwork.Clock, ttl time.Duration, maxItems, maxBytes int) *AnswerItems {
	a := &AnswerItems{sweptTable: newSweptTable[ItemKey, []byte](clock, ttl, maxItems), maxBytes: maxBytes}
	a.onDrop = func(e *ttlEntry[ItemKey, []byte]) { a.bytes -= len(e.val) }
	return a
}

// Keep stores a copy of an item the client was answered with. The ids are the gateway's own,
// unique to their answer (convo.Request.IDSuffix): an id kept before is the same item, only
// marked used. An item larger than the table's byte bound is not kept.
func (a *AnswerItems) Keep(clientKeyID int64, id, item string) {
	if id == "" || len(item) > a.maxBytes {
		return
	}
	now := a.clock.Now()
	k := ItemKey{ClientKeyID: clientKeyID, ID: id}
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.live(k, now); e != nil {
		return
	}
	k.ID = strings.Clone(id) // the caller's string may share a buffer that is reused
	a.put(k, []byte(item), now)
	a.bytes += len(item)
	for a.bytes > a.maxBytes {
		a.drop(a.t.oldest())
	}
}

// Lookup is the item kept under id for the client key (nil when none is), marked used. The
// bytes are the table's: not to be changed.
func (a *AnswerItems) Lookup(clientKeyID int64, id string) []byte {
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.live(ItemKey{ClientKeyID: clientKeyID, ID: id}, now); e != nil {
		return e.val
	}
	return nil
}

// Bytes is the size of the items held.
func (a *AnswerItems) Bytes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bytes
}

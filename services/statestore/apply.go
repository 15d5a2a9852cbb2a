package statestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"switchyard/services/resilience"
)

// Tables are the in-memory tables a replica installs the records of other replicas in. A nil
// field skips its kind: its records are accepted and ignored.
type Tables struct {
	Cooldowns *resilience.Cooldowns
	Breakers  *resilience.Breakers
	Lockouts  *resilience.Lockouts
	Lanes     *resilience.Lanes
	Usage     *resilience.Usage
	Rests     *resilience.TargetCooldowns
	Pins      *resilience.Pins
	Stored    *resilience.StoredPins
	Replays   *resilience.ReplayMemory
	Binds     *resilience.SessionBinds
	// OAuth installs an OAuthRefresh record (the refresh state is the oauth service's type,
	// which this package cannot name: oauth imports it); id and value as Apply takes them.
	OAuth func(id, value []byte) error
}

// Apply installs a record another replica Put: kind, its ID and its Value, each encoded as
// JSON; a value that is empty or null deletes the entry. It goes straight into the table's
// memory without reaching the table's persist hook, so it is neither written again nor sent
// back. The ID names the entry even when the value carries key fields of its own.
func (t Tables) Apply(kind Kind, id, value []byte) error {
	del := isNull(value)
	var err error
	switch kind {
	case Connection:
		err = applyOne(t.Cooldowns, id, value, del, func(id int64, st *resilience.ConnState) {
			st.ConnectionID = id
			t.Cooldowns.Apply(*st)
		})
	case ClaudeLane:
		err = applyOne(t.Lanes, id, value, del, func(id int64, st *resilience.LaneState) {
			st.ConnectionID = id
			t.Lanes.Apply(*st)
		})
	case ClaudeUsage:
		err = applyOne(t.Usage, id, value, del, func(id int64, u *resilience.AccountUsage) {
			u.ConnectionID = id
			t.Usage.Apply(*u)
		})
	case Breaker:
		// A deleted breaker is one closed without failures.
		err = applyOne(t.Breakers, id, value, del, func(k resilience.BreakerKey, st *resilience.BreakerState) {
			st.Provider, st.Model = k.Provider, k.Model
			t.Breakers.Apply(*st)
		})
	case TargetRest:
		// A deleted rest is one with a zero Until.
		err = applyOne(t.Rests, id, value, del, func(k TargetRestID, c *resilience.TargetCooldown) {
			c.Provider, c.ConnectionID, c.Model = k.Provider, k.ConnectionID, k.Model
			t.Rests.Apply(*c)
		})
	case ModelLockout:
		err = applyOne(t.Lockouts, id, value, del, func(k resilience.LockoutKey, l *resilience.Lockout) {
			t.Lockouts.Apply(k, orNil(l, del))
		})
	case SessionPin:
		err = applyOne(t.Pins, id, value, del, func(k resilience.PinKey, p *resilience.Pin) {
			t.Pins.Apply(k, orNil(p, del))
		})
	case StoredPin:
		err = applyOne(t.Stored, id, value, del, func(k resilience.StoredKey, p *resilience.StoredPin) {
			t.Stored.Apply(k, orNil(p, del))
		})
	case ReplaySeal:
		err = applyOne(t.Replays, id, value, del, func(k resilience.ReplayKey, s *resilience.ReplaySeal) {
			t.Replays.Apply(k, orNil(s, del))
		})
	case ClaudeSession:
		err = applyOne(t.Binds, id, value, del, func(s resilience.Session, b *resilience.SessionBind) {
			t.Binds.Apply(s, orNil(b, del))
		})
	case OAuthRefresh:
		if t.OAuth != nil {
			if del {
				value = nil
			}
			err = t.OAuth(id, value)
		}
	default:
		return fmt.Errorf("apply %s record: unknown kind", kind)
	}
	if err != nil {
		return fmt.Errorf("apply %s record %s: %w", kind, id, err)
	}
	return nil
}

// applyOne decodes a record's id and, unless it is a deletion, its value, and hands both to
// apply; a deletion hands the zero value. Nothing happens when table is nil.
func applyOne[T comparable, I, V any](table T, id, value []byte, del bool, apply func(I, *V)) error {
	var zero T
	if table == zero {
		return nil
	}
	var k I
	if err := json.Unmarshal(id, &k); err != nil {
		return fmt.Errorf("decode id: %w", err)
	}
	var v V
	if !del {
		if err := json.Unmarshal(value, &v); err != nil {
			return fmt.Errorf("decode value: %w", err)
		}
	}
	apply(k, &v)
	return nil
}

// orNil is v, or nil for a deletion (the tables keyed apart from their values take nil).
func orNil[V any](v *V, del bool) *V {
	if del {
		return nil
	}
	return v
}

// isNull reports whether an encoded value stands for no value: a deleted record.
func isNull(value []byte) bool {
	v := bytes.TrimSpace(value)
	return len(v) == 0 || bytes.Equal(v, []byte("null"))
}

// EncodeID is the JSON of a record's ID, as Apply takes it on another replica.
func EncodeID(r Record) ([]byte, error) {
	if r.ID == nil {
		return nil, errors.New("record " + string(r.Kind) + " " + r.Key + " has no ID")
	}
	return json.Marshal(r.ID)
}

// ApplyStored installs every record of s in the tables, as they were loaded at start, merged
// with what they hold: a replica whose broadcast listener was cut off resynchronises this way.
// Entries the others deleted meanwhile stay until they expire or are changed again.
func (t Tables) ApplyStored(ctx context.Context, s Store) error {
	saved, err := LoadResilience(ctx, s)
	if err != nil {
		return err
	}
	if t.Cooldowns != nil {
		t.Cooldowns.Load(saved.Connections)
	}
	if t.Breakers != nil {
		t.Breakers.Load(saved.Breakers)
	}
	if t.Lockouts != nil {
		t.Lockouts.Load(saved.Lockouts)
	}
	if t.Lanes != nil {
		t.Lanes.Load(saved.Lanes)
	}
	if t.Usage != nil {
		t.Usage.Load(saved.Usage)
	}
	if t.Rests != nil {
		t.Rests.Load(saved.Rests)
	}
	if t.Pins != nil {
		t.Pins.Load(saved.Pins)
	}
	if t.Binds != nil {
		t.Binds.Load(saved.SessionBinds)
	}
	if t.Stored != nil {
		t.Stored.Load(saved.StoredPins)
	}
	if t.Replays != nil {
		t.Replays.Load(saved.ReplaySeals)
	}
	return nil
}

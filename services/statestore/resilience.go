package statestore

import (
	"context"
	"strconv"

	"switchyard/services/resilience"
)

// ConnRecord is the record of a connection's cooldown and terminal state; a state with nothing
// left to remember deletes it.
func ConnRecord(st resilience.ConnState) Record {
	return perConnection(Connection, st.ConnectionID, st, !st.Empty())
}

// BreakerRecord is the record of a circuit breaker; a closed breaker without failures deletes it.
func BreakerRecord(st resilience.BreakerState) Record {
	r := Record{Kind: Breaker, Key: st.Provider + "/" + st.Model, Provider: st.Provider, ID: st.Key()}
	if !st.Empty() {
		if st.State == resilience.CircuitNone {
			st.State = resilience.CircuitClosed
		}
		r.Value = st
	}
	return r
}

// LockoutRecord is the record of a model lockout; nil (the lockout ended) deletes it.
func LockoutRecord(k resilience.LockoutKey, l *resilience.Lockout) Record {
	r := Record{Kind: ModelLockout, Key: k.Provider + "/" + strconv.FormatInt(k.ConnectionID, 10) + "/" + k.Target,
		ConnectionID: k.ConnectionID, ID: k}
	if l != nil {
		r.Value = *l
	}
	return r
}

// LaneRecord is the record of a connection's Claude lane; nothing left to remember deletes it.
func LaneRecord(st resilience.LaneState) Record {
	return perConnection(ClaudeLane, st.ConnectionID, st, !st.Empty())
}

// UsageRecord is the record of a subscription account's usage windows.
func UsageRecord(u resilience.AccountUsage) Record {
	return perConnection(ClaudeUsage, u.ConnectionID, u, true)
}

// perConnection is the record of a kind kept one per connection, keyed by its id; it holds v
// when keep is set and otherwise deletes the stored one.
func perConnection(kind Kind, id int64, v any, keep bool) Record {
	r := Record{Kind: kind, Key: strconv.FormatInt(id, 10), ConnectionID: id, ID: id}
	if keep {
		r.Value = v
	}
	return r
}

// TargetRestID is the identity of a combo target's rest (Record.ID of TargetRest); its names
// are those of resilience.TargetCooldown.
type TargetRestID struct {
	Provider     string `json:"provider"`
	ConnectionID int64  `json:"connection_id"`
	Model        string `json:"model"`
}

// TargetRestRecord is the record of a combo target's rest; a rest that ended deletes it.
func TargetRestRecord(t resilience.TargetCooldown) Record {
	r := Record{Kind: TargetRest, Key: t.Provider + "/" + strconv.FormatInt(t.ConnectionID, 10) + "/" + t.Model,
		Provider: t.Provider, ConnectionID: t.ConnectionID,
		ID: TargetRestID{Provider: t.Provider, ConnectionID: t.ConnectionID, Model: t.Model}}
	if !t.Until.IsZero() {
		r.Value = t
	}
	return r
}

// PinRecord is the record of a session pin; nil (the pin ended) deletes it. A provider pin
// goes with its provider and its connection.
func PinRecord(k resilience.PinKey, p *resilience.Pin) Record {
	r := Record{Kind: SessionPin, Key: k.Session.String() + "/" + k.Scope, ID: k}
	if p != nil {
		r.Provider, r.ConnectionID, r.Value = p.Provider(), p.ConnectionID, *p
	}
	return r
}

// SessionBindRecord is the record of a Claude Code session's account; nil deletes it.
func SessionBindRecord(s resilience.Session, b *resilience.SessionBind) Record {
	r := Record{Kind: ClaudeSession, Key: s.String(), ID: s}
	if b != nil {
		r.Value = *b
	}
	return r
}

// StoredPinRecord is the record of a stored-state pin; nil (the pin ended) deletes it. It goes
// with its provider and its connection.
func StoredPinRecord(k resilience.StoredKey, p *resilience.StoredPin) Record {
	r := Record{Kind: StoredPin, Key: strconv.FormatInt(k.Namespace, 10) + "/" + k.ID, ID: k}
	if p != nil {
		r.Provider, r.ConnectionID, r.Value = p.Provider, p.ConnectionID, *p
	}
	return r
}

// ReplaySealRecord is the record of a seal a connection refused; nil (forgotten) deletes it. It
// goes with its connection.
func ReplaySealRecord(k resilience.ReplayKey, s *resilience.ReplaySeal) Record {
	d, _ := k.Seal.MarshalText()
	r := Record{Kind: ReplaySeal, Key: strconv.FormatInt(k.ConnectionID, 10) + "/" + k.Model + "/" + string(d),
		ConnectionID: k.ConnectionID, ID: k}
	if s != nil {
		r.Value = *s
	}
	return r
}

// Resilience is the stored resilience state, as loaded at start.
type Resilience struct {
	Connections  []resilience.ConnState
	Breakers     []resilience.BreakerState
	Lockouts     []resilience.Lockout
	Lanes        []resilience.LaneState
	Usage        []resilience.AccountUsage
	Pins         []resilience.Pin
	SessionBinds []resilience.SessionBind
	Rests        []resilience.TargetCooldown
	StoredPins   []resilience.StoredPin
	ReplaySeals  []resilience.ReplaySeal
}

// LoadResilience reads every stored connection state, breaker, lockout, lane, usage reading,
// target rest, session pin, Claude Code session binding, stored-state pin and refused seal.
func LoadResilience(ctx context.Context, s Store) (Resilience, error) {
	var out Resilience
	var err error
	loadInto(ctx, s, Connection, &out.Connections, &err)
	loadInto(ctx, s, Breaker, &out.Breakers, &err)
	loadInto(ctx, s, ModelLockout, &out.Lockouts, &err)
	loadInto(ctx, s, ClaudeLane, &out.Lanes, &err)
	loadInto(ctx, s, ClaudeUsage, &out.Usage, &err)
	loadInto(ctx, s, SessionPin, &out.Pins, &err)
	loadInto(ctx, s, ClaudeSession, &out.SessionBinds, &err)
	loadInto(ctx, s, TargetRest, &out.Rests, &err)
	loadInto(ctx, s, StoredPin, &out.StoredPins, &err)
	loadInto(ctx, s, ReplaySeal, &out.ReplaySeals, &err)
	return out, err
}

// loadInto sets *dst to every stored record of kind, unless an earlier load failed (*err set);
// a failure is left in *err.
func loadInto[T any](ctx context.Context, s Store, kind Kind, dst *[]T, err *error) {
	if *err == nil {
		*dst, *err = LoadAll[T](ctx, s, kind)
	}
}

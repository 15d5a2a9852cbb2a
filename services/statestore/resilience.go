package statestore

import (
	"context"
	"strconv"

	"switchyard/services/resilience"
)

// ConnRecord is the record of a connection's cooldown and terminal state; a state with nothing
// left to remember deletes it.
func ConnRecord(st resilience.ConnState) Record {
	r := Record{Kind: Connection, Key: strconv.FormatInt(st.ConnectionID, 10), ConnectionID: st.ConnectionID}
	if !st.Empty() {
		r.Value = st
	}
	return r
}

// BreakerRecord is the record of a circuit breaker; a closed breaker without failures deletes it.
func BreakerRecord(st resilience.BreakerState) Record {
	r := Record{Kind: Breaker, Key: st.Provider + "/" + st.Model, Provider: st.Provider}
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
		ConnectionID: k.ConnectionID}
	if l != nil {
		r.Value = *l
	}
	return r
}

// LaneRecord is the record of a connection's Claude lane; nothing left to remember deletes it.
func LaneRecord(st resilience.LaneState) Record {
	r := Record{Kind: ClaudeLane, Key: strconv.FormatInt(st.ConnectionID, 10), ConnectionID: st.ConnectionID}
	if !st.Empty() {
		r.Value = st
	}
	return r
}

// UsageRecord is the record of a subscription account's usage windows.
func UsageRecord(u resilience.AccountUsage) Record {
	return Record{Kind: ClaudeUsage, Key: strconv.FormatInt(u.ConnectionID, 10), ConnectionID: u.ConnectionID, Value: u}
}

// Resilience is the stored resilience state, as loaded at start.
type Resilience struct {
	Connections []resilience.ConnState
	Breakers    []resilience.BreakerState
	Lockouts    []resilience.Lockout
	Lanes       []resilience.LaneState
	Usage       []resilience.AccountUsage
}

// LoadResilience reads every stored connection state, breaker, lockout, lane and usage reading.
func LoadResilience(ctx context.Context, s Store) (Resilience, error) {
	var out Resilience
	var err error
	if out.Connections, err = LoadAll[resilience.ConnState](ctx, s, Connection); err != nil {
		return out, err
	}
	if out.Breakers, err = LoadAll[resilience.BreakerState](ctx, s, Breaker); err != nil {
		return out, err
	}
	if out.Lockouts, err = LoadAll[resilience.Lockout](ctx, s, ModelLockout); err != nil {
		return out, err
	}
	if out.Lanes, err = LoadAll[resilience.LaneState](ctx, s, ClaudeLane); err != nil {
		return out, err
	}
	out.Usage, err = LoadAll[resilience.AccountUsage](ctx, s, ClaudeUsage)
	return out, err
}

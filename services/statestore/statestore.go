// Package statestore persists resilience state: connection cooldowns and terminal states,
// circuit breakers, model lockouts, and every kind to come (lane state, affinity pins, leases).
// The in-memory tables stay the source of truth on the request path; each change is handed to
// the Store, which writes it behind the request path. Store is the seam where a shared backend
// for several replicas plugs in: the engine and the tables never see which one runs.
package statestore

import (
	"context"
	"encoding/json"
	"fmt"
)

// Kind names a kind of state; each kind has its own key space.
type Kind string

// The kinds of state.
const (
	Connection   Kind = "connection"    // resilience.ConnState by connection id
	Breaker      Kind = "breaker"       // resilience.BreakerState by provider/model
	ModelLockout Kind = "model_lockout" // resilience.Lockout by provider/connection/target
	ClaudeLane   Kind = "claude_lane"   // resilience.LaneState by connection id
	ClaudeUsage  Kind = "claude_usage"  // resilience.AccountUsage by connection id
	OAuthRefresh Kind = "oauth_refresh" // oauth.RefreshState (strikes, back-off) by connection id
	TargetRest   Kind = "target_rest"   // resilience.TargetCooldown by provider/model/connection
	SessionPin   Kind = "session_pin"   // resilience.Pin by session/scope
	// ClaudeSession is resilience.SessionBind by session: a Claude Code session's account.
	ClaudeSession Kind = "claude_session"
	// StoredPin is resilience.StoredPin by client key/id: the connection that holds a stored
	// Responses answer.
	StoredPin Kind = "stored_pin"
	// ReplaySeal is resilience.ReplaySeal by connection/model/digest: replayed reasoning the
	// connection refused.
	ReplaySeal Kind = "replay_seal"
)

// Record is one piece of state.
type Record struct {
	Kind Kind
	Key  string
	// Provider and ConnectionID scope the record: it is dropped when the provider or the
	// connection is deleted, and a change arriving after that deletion is not written.
	Provider     string
	ConnectionID int64
	// Value is encoded as JSON when written; nil deletes the record.
	Value any
	// ID is the record's identity as its table knows it, encodable as JSON: what another
	// replica needs to find the entry to set or delete (Tables.Apply). A connection id for the
	// kinds kept per connection, resilience.BreakerKey, resilience.LockoutKey, TargetRestID,
	// resilience.PinKey, resilience.Session, resilience.StoredKey or resilience.ReplayKey.
	ID any
}

// Store persists records.
type Store interface {
	// Put records the newest value of a record. It never blocks on I/O.
	Put(r Record)
	// Load calls each with the JSON value of every stored record of a kind.
	Load(ctx context.Context, kind Kind, each func(raw []byte) error) error
	// Sync returns once every record Put before the call is committed, so an answer that
	// reports a change can go out only after the change is safe.
	Sync(ctx context.Context) error
}

// LoadAll decodes every stored record of a kind.
func LoadAll[T any](ctx context.Context, s Store, kind Kind) ([]T, error) {
	var out []T
	err := s.Load(ctx, kind, func(raw []byte) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("decode %s state: %w", kind, err)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

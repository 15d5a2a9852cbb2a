package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"unicode"

	"switchyard/db"
	"switchyard/services/errs"
	"switchyard/services/names"
)

// Connection is the public view of a connection; it never carries the credential.
type Connection struct {
	ID            int64           `json:"id"`
	ProviderID    int64           `json:"provider_id"`
	Provider      string          `json:"provider"`
	Name          string          `json:"name"`
	AuthType      string          `json:"auth_type"`
	HasAPIKey     bool            `json:"has_api_key"`
	Priority      int             `json:"priority"`
	MaxConcurrent *int            `json:"max_concurrent"`
	Overrides     json.RawMessage `json:"overrides"`
	Enabled       bool            `json:"enabled"`
	// LowPriorityLane and LimitReset are the Claude subscription toggles of an OAuth connection.
	LowPriorityLane bool `json:"low_priority_lane"`
	LimitReset      bool `json:"limit_reset"`
	// Account is the subscription account of an OAuth connection; nil for API keys.
	Account   *AccountView `json:"account,omitempty"`
	CreatedAt int64        `json:"created_at"`
	UpdatedAt int64        `json:"updated_at"`
}

// OptionalInt distinguishes "absent" from "null" in a partial update.
type OptionalInt struct {
	Set   bool
	Value *int
}

// UnmarshalJSON records that the field was present, and null as a nil Value.
func (o *OptionalInt) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Value = nil
		return nil
	}
	var v int
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	o.Value = &v
	return nil
}

// ConnectionInput is a create or partial update; absent fields are left as they are.
type ConnectionInput struct {
	Provider      *string         `json:"provider"`
	Name          *string         `json:"name"`
	AuthType      *string         `json:"auth_type"`
	APIKey        *string         `json:"api_key"`
	Priority      *int            `json:"priority"`
	MaxConcurrent OptionalInt     `json:"max_concurrent"`
	Overrides     json.RawMessage `json:"overrides"`
	Enabled       *bool           `json:"enabled"`
	// SetupToken is a pasted Claude setup token (sk-ant-oat01-…): the credential of an OAuth
	// connection that is never refreshed.
	SetupToken      *string `json:"setup_token"`
	LowPriorityLane *bool   `json:"low_priority_lane"`
	LimitReset      *bool   `json:"limit_reset"`
}

// ConnectionOverridesValidator checks a connection's override document and returns it in
// canonical form, or per-field messages. Nil accepts any JSON object.
type ConnectionOverridesValidator func(raw []byte) ([]byte, map[string]errs.Msg)

func (s *Service) connectionView(c db.Connection, provider string) Connection {
	v := Connection{ID: c.ID, ProviderID: c.ProviderID, Provider: provider, Name: c.Name, AuthType: c.AuthType,
		HasAPIKey: len(c.Secret) > 0, Priority: c.Priority, Overrides: json.RawMessage(c.Overrides),
		Enabled: c.Enabled, LowPriorityLane: c.LowPriorityLane, LimitReset: c.LimitReset, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
	if c.MaxConcurrent.Valid {
		n := int(c.MaxConcurrent.Int64)
		v.MaxConcurrent = &n
	}
	if c.AuthType == AuthOAuth {
		v.Account = &AccountView{}
		if cred, err := s.openOAuth(c); err == nil {
			a := cred.Account
			v.Account = &AccountView{Email: a.Email, Organization: a.OrganizationName, Plan: a.Plan, SetupToken: cred.SetupToken()}
		}
	}
	return v
}

// ListConnections returns every connection with its provider name.
func (s *Service) ListConnections(ctx context.Context) ([]Connection, error) {
	provs, err := db.ListProviders(ctx, s.db.R)
	if err != nil {
		return nil, err
	}
	names := make(map[int64]string, len(provs))
	for _, p := range provs {
		names[p.ID] = p.Name
	}
	rows, err := db.ListConnections(ctx, s.db.R)
	if err != nil {
		return nil, err
	}
	out := make([]Connection, len(rows))
	for i, r := range rows {
		out[i] = s.connectionView(r, names[r.ProviderID])
	}
	return out, nil
}

// GetConnection returns one connection.
func (s *Service) GetConnection(ctx context.Context, id int64) (Connection, error) {
	c, err := db.GetConnection(ctx, s.db.R, id)
	if err != nil {
		return Connection{}, notFound(err, "err.connection_not_found", id)
	}
	p, err := db.GetProvider(ctx, s.db.R, c.ProviderID)
	if err != nil {
		return Connection{}, err
	}
	return s.connectionView(c, p.Name), nil
}

// CreateConnection validates and stores a new connection with its sealed API key.
func (s *Service) CreateConnection(ctx context.Context, in ConnectionInput, validate ConnectionOverridesValidator) (Connection, error) {
	s.mu.Lock()
	defer s.unlock()
	var out Connection
	err := s.commit(ctx, func(tx *db.Tx) error {
		c := db.Connection{AuthType: AuthAPIKey, Enabled: true}
		prov, secret, err := s.applyConnection(ctx, tx, &c, in, true, validate)
		if err != nil {
			return err
		}
		c.Secret = []byte{0} // placeholder until the id is known: the AAD binds the secret to its row
		if err := db.InsertConnection(ctx, tx, &c); err != nil {
			return mapDBErr(err, "name", "err.connection_exists")
		}
		c.Secret = s.box.Seal(secret, connectionAAD(c.ID))
		if err := db.UpdateConnection(ctx, tx, &c); err != nil {
			return err
		}
		out = s.connectionView(c, prov.Name)
		return nil
	})
	if err != nil {
		return Connection{}, err
	}
	return out, s.rebuild(ctx)
}

// UpdateConnection applies a partial update; a new api_key replaces the stored one.
func (s *Service) UpdateConnection(ctx context.Context, id int64, in ConnectionInput, validate ConnectionOverridesValidator) (Connection, error) {
	s.mu.Lock()
	defer s.unlock()
	var out Connection
	newCreds := false
	err := s.commit(ctx, func(tx *db.Tx) error {
		c, err := db.GetConnection(ctx, tx, id)
		if err != nil {
			return notFound(err, "err.connection_not_found", id)
		}
		oldName, oldProvider := c.Name, c.ProviderID
		prov, secret, err := s.applyConnection(ctx, tx, &c, in, false, validate)
		if err != nil {
			return err
		}
		if c.Name != oldName || c.ProviderID != oldProvider {
			if err := s.guardConnection(ctx, tx, oldProvider, oldName); err != nil {
				return err
			}
		}
		if secret != nil {
			c.Secret = s.box.Seal(secret, connectionAAD(c.ID))
			newCreds = true
		}
		if err := db.UpdateConnection(ctx, tx, &c); err != nil {
			return mapDBErr(err, "name", "err.connection_exists")
		}
		out = s.connectionView(c, prov.Name)
		return nil
	})
	if err != nil {
		return Connection{}, err
	}
	if err := s.rebuild(ctx); err != nil {
		return Connection{}, err
	}
	if newCreds {
		// After the rebuild, so no request can fail with the old key once the state is cleared.
		for _, fn := range s.newCreds {
			if err := fn(ctx, id); err != nil {
				return Connection{}, err
			}
		}
	}
	return out, nil
}

// DeleteConnection removes a connection.
func (s *Service) DeleteConnection(ctx context.Context, id int64) error {
	s.mu.Lock()
	defer s.unlock()
	return s.deleteAndRebuild(ctx, func(tx *db.Tx) error {
		c, err := db.GetConnection(ctx, tx, id)
		if err != nil {
			return mapDBErr(err, "", "")
		}
		if err := s.guardConnection(ctx, tx, c.ProviderID, c.Name); err != nil {
			return err
		}
		return mapDBErr(db.DeleteConnection(ctx, tx, id), "", "")
	})
}

// guardConnection asks the guards about a connection name that stops existing.
func (s *Service) guardConnection(ctx context.Context, q db.Querier, providerID int64, name string) error {
	p, err := db.GetProvider(ctx, q, providerID)
	if err != nil {
		return err
	}
	return s.guard(ctx, q, Change{GoneProvider: p.Name, GoneConnection: name})
}

func (s *Service) applyConnection(ctx context.Context, q db.Querier, c *db.Connection, in ConnectionInput, create bool,
	validate ConnectionOverridesValidator) (prov db.Provider, secret []byte, err error) {
	fields := map[string]errs.Msg{}
	switch {
	case in.Provider != nil:
		prov, err = db.GetProviderByName(ctx, q, strings.TrimSpace(*in.Provider))
		if errors.Is(err, db.ErrNotFound) {
			fields["provider"] = errs.M("err.no_provider")
		} else if err != nil {
			return prov, nil, err
		}
		c.ProviderID = prov.ID
	case create:
		fields["provider"] = errs.M("err.required")
	default:
		if prov, err = db.GetProvider(ctx, q, c.ProviderID); err != nil {
			return prov, nil, err
		}
	}
	if in.Name != nil {
		c.Name = strings.TrimSpace(*in.Name)
	}
	if create || in.Name != nil {
		if m, bad := names.Check(c.Name); bad {
			fields["name"] = m
		}
	}
	if in.AuthType != nil {
		switch {
		case *in.AuthType != AuthAPIKey && *in.AuthType != AuthOAuth:
			fields["auth_type"] = errs.M("err.auth_type")
		case !create && *in.AuthType != c.AuthType:
			fields["auth_type"] = errs.M("err.auth_type_fixed")
		default:
			c.AuthType = *in.AuthType
		}
	}
	oauth := c.AuthType == AuthOAuth
	claude := prov.ID == 0 || prov.Type == TypeAnthropic
	switch {
	case create && prov.ID != 0 && AccountsOnly(prov.Type):
		// An account of these kinds comes only from its sign-in (the sign-in routes make it).
		fields["auth_type"] = errs.M("err.signin_only", prov.Type)
	case oauth && prov.ID != 0 && !TakesAccounts(prov.Type):
		fields["auth_type"] = errs.M("err.oauth_provider")
	}
	switch {
	case in.APIKey != nil && oauth:
		fields["api_key"] = errs.M("err.api_key_oauth")
	case in.APIKey != nil:
		apiKey := strings.TrimSpace(*in.APIKey)
		switch {
		case apiKey == "":
			fields["api_key"] = errs.M("err.required")
		case strings.IndexFunc(apiKey, unicode.IsControl) >= 0:
			// NUL, line breaks, other C0/C1 controls and DEL: an upstream header cannot carry them.
			fields["api_key"] = errs.M("err.api_key_control")
		case strings.IndexFunc(apiKey, unicode.IsSpace) >= 0:
			fields["api_key"] = errs.M("err.api_key")
		default:
			secret = []byte(apiKey)
		}
	case create && !oauth:
		fields["api_key"] = errs.M("err.required")
	}
	switch {
	case in.SetupToken != nil && (!oauth || !claude):
		fields["setup_token"] = errs.M("err.claude_only")
	case in.SetupToken != nil:
		token := strings.TrimSpace(*in.SetupToken)
		if m, bad := checkSetupToken(token); bad {
			fields["setup_token"] = m
			break
		}
		cred := OAuthCredential{AccessToken: Secret(token), Rev: 1}
		if !create {
			if old, err := s.openOAuth(*c); err == nil {
				cred.Rev = old.Rev + 1
			}
		}
		cred.grant = cred.Rev
		secret = encodeOAuth(cred)
	case create && oauth:
		fields["setup_token"] = errs.M("err.required")
	}
	if in.LowPriorityLane != nil {
		if *in.LowPriorityLane && (!oauth || !claude) {
			fields["low_priority_lane"] = errs.M("err.claude_only")
		}
		c.LowPriorityLane = *in.LowPriorityLane
	}
	if in.LimitReset != nil {
		if *in.LimitReset && (!oauth || !claude) {
			fields["limit_reset"] = errs.M("err.claude_only")
		}
		c.LimitReset = *in.LimitReset
	}
	if in.Priority != nil {
		if *in.Priority < 0 || *in.Priority > 1000 {
			fields["priority"] = errs.M("err.priority")
		}
		c.Priority = *in.Priority
	}
	if in.MaxConcurrent.Set {
		if v := in.MaxConcurrent.Value; v == nil {
			c.MaxConcurrent = sql.NullInt64{}
		} else if *v < 1 || *v > 10000 {
			fields["max_concurrent"] = errs.M("err.max_concurrent")
		} else {
			c.MaxConcurrent = sql.NullInt64{Int64: int64(*v), Valid: true}
		}
	}
	if in.Enabled != nil {
		c.Enabled = *in.Enabled
	}
	applyOverrides(&c.Overrides, in.Overrides, "overrides", validate, fields)
	if len(fields) > 0 {
		return prov, nil, errs.Fields(fields)
	}
	return prov, secret, nil
}

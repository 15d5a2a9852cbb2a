package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"switchyard/db"
	"switchyard/services/errs"
	"switchyard/services/names"
)

// OAuthCredential is what an OAuth connection holds: its tokens and the account they belong to.
// It is sealed into the connection's secret like an API key; the tokens print as placeholders.
type OAuthCredential struct {
	AccessToken Secret
	// RefreshToken is "" for a pasted setup token, which lives long and is never refreshed.
	RefreshToken Secret
	// IDToken is the OpenID id token of a ChatGPT account ("" for other kinds); its claims name
	// the account and its plan.
	IDToken Secret
	// ExpiresAt is when the access token stops working; zero when unknown (setup tokens).
	ExpiresAt time.Time
	// RefreshedAt is when the pair was issued: the sign-in or the last refresh.
	RefreshedAt time.Time
	Account     OAuthAccount
	// Rev counts the credentials stored for the connection; a refresh stores Rev+1 only over
	// Rev, so a sign-in that happened meanwhile is never overwritten by an older refresh.
	Rev int64
	// grant is the Rev of the sign-in (or pasted token) the pair descends from: a refresh keeps
	// it, a new credential changes it. A replica reloading the catalog tells by it a new
	// credential, which clears terminal states, from a rotated pair, which does not. 0 for
	// credentials stored before it was recorded.
	grant int64
}

// SetupToken reports whether the credential is a pasted long-lived token without refresh.
func (c OAuthCredential) SetupToken() bool { return c.RefreshToken == "" }

// OAuthAccount is the subscription account behind an OAuth connection; none of it is secret.
type OAuthAccount struct {
	UUID             string `json:"uuid,omitempty"`
	Email            string `json:"email,omitempty"`
	OrganizationUUID string `json:"organization_uuid,omitempty"`
	OrganizationName string `json:"organization_name,omitempty"`
	// Plan is the subscription as the token endpoint names it (e.g. claude_max); "" if unknown.
	Plan string `json:"plan,omitempty"`
}

// sealedOAuth is the stored form of an OAuthCredential, the plaintext that is sealed.
type sealedOAuth struct {
	AccessToken  string       `json:"access_token"`
	RefreshToken string       `json:"refresh_token,omitempty"`
	IDToken      string       `json:"id_token,omitempty"`
	ExpiresAt    int64        `json:"expires_at,omitempty"`   // unix ms
	RefreshedAt  int64        `json:"refreshed_at,omitempty"` // unix ms
	Account      OAuthAccount `json:"account"`
	Rev          int64        `json:"rev"`
	Grant        int64        `json:"grant,omitempty"`
}

func encodeOAuth(c OAuthCredential) []byte {
	s := sealedOAuth{AccessToken: c.AccessToken.Reveal(), RefreshToken: c.RefreshToken.Reveal(), IDToken: c.IDToken.Reveal(),
		Account: c.Account, Rev: c.Rev, Grant: c.grant}
	if !c.ExpiresAt.IsZero() {
		s.ExpiresAt = c.ExpiresAt.UnixMilli()
	}
	if !c.RefreshedAt.IsZero() {
		s.RefreshedAt = c.RefreshedAt.UnixMilli()
	}
	b, _ := json.Marshal(s) // plain strings and numbers: cannot fail
	return b
}

func decodeOAuth(b []byte) (OAuthCredential, error) {
	var s sealedOAuth
	if err := json.Unmarshal(b, &s); err != nil {
		return OAuthCredential{}, fmt.Errorf("decode oauth credential: %w", err)
	}
	c := OAuthCredential{AccessToken: Secret(s.AccessToken), RefreshToken: Secret(s.RefreshToken), IDToken: Secret(s.IDToken),
		Account: s.Account, Rev: s.Rev, grant: s.Grant}
	if s.ExpiresAt > 0 {
		c.ExpiresAt = time.UnixMilli(s.ExpiresAt)
	}
	if s.RefreshedAt > 0 {
		c.RefreshedAt = time.UnixMilli(s.RefreshedAt)
	}
	return c, nil
}

// AccountView is what the admin API shows of an OAuth connection's account; never a token.
type AccountView struct {
	Email        string `json:"email,omitempty"`
	Organization string `json:"organization,omitempty"`
	Plan         string `json:"plan,omitempty"`
	// SetupToken is set for a pasted long-lived token (no refresh, no account details).
	SetupToken bool `json:"setup_token"`
}

// openOAuth reads the credential of an OAuth connection row.
func (s *Service) openOAuth(c db.Connection) (OAuthCredential, error) {
	plain, err := s.box.Open(c.Secret, connectionAAD(c.ID))
	if err != nil {
		return OAuthCredential{}, err
	}
	return decodeOAuth(plain)
}

// setupTokenPrefix starts every Claude setup token (claude setup-token).
const setupTokenPrefix = "sk-ant-oat"

// checkSetupToken says what is wrong with a pasted setup token, if anything.
func checkSetupToken(t string) (errs.Msg, bool) {
	switch {
	case t == "":
		return errs.M("err.required"), true
	case strings.IndexFunc(t, unicode.IsControl) >= 0, strings.IndexFunc(t, unicode.IsSpace) >= 0:
		return errs.M("err.api_key"), true
	case !strings.HasPrefix(t, setupTokenPrefix):
		return errs.M("err.setup_token"), true
	}
	return errs.Msg{}, false
}

// SaveOAuthAccount stores a signed-in account on a provider (of type anthropic, codex or copilot:
// TakesAccounts). When one of the
// provider's OAuth connections already belongs to the same account (by the account's UUID in its
// stored credential) it gets the new credential and keeps its name: signing in again never
// duplicates a connection, and clears a terminal state such as expired. Otherwise a new connection
// is created, named name when the operator gave one (name-2, name-3, … when taken) or else the next
// free of claude-1, claude-2, … (chatgpt-N, copilot-N for the other kinds): never after the account's e-mail, which only operators see (it
// stays in the credential and shows as the account's details). created reports which happened.
func (s *Service) SaveOAuthAccount(ctx context.Context, provider, name string, cred OAuthCredential) (Connection, bool, error) {
	name = strings.TrimSpace(name)
	if name != "" {
		if m, bad := names.Check(name); bad {
			return Connection{}, false, errs.Fields(map[string]errs.Msg{"name": m})
		}
	}
	s.mu.Lock()
	defer s.unlock()
	var out Connection
	var existing int64
	err := s.commit(ctx, func(tx *db.Tx) error {
		prov, err := db.GetProviderByName(ctx, tx, provider)
		if errors.Is(err, db.ErrNotFound) {
			return errs.Field("provider", "err.no_provider")
		}
		if err != nil {
			return err
		}
		if !TakesAccounts(prov.Type) {
			return errs.Field("provider", "err.oauth_provider")
		}
		rows, err := db.ListConnections(ctx, tx)
		if err != nil {
			return err
		}
		taken := map[string]bool{}
		for _, r := range rows {
			if r.ProviderID == prov.ID {
				taken[r.Name] = true
			}
		}
		for _, r := range rows {
			if r.ProviderID != prov.ID || r.AuthType != AuthOAuth || cred.Account.UUID == "" {
				continue
			}
			old, err := s.openOAuth(r)
			if err != nil || old.Account.UUID != cred.Account.UUID {
				continue
			}
			cred.Rev = old.Rev + 1
			cred.grant = cred.Rev
			r.Secret = s.box.Seal(encodeOAuth(cred), connectionAAD(r.ID))
			if err := db.UpdateConnection(ctx, tx, &r); err != nil {
				return err
			}
			existing, out = r.ID, s.connectionView(r, prov.Name)
			return nil
		}
		c := db.Connection{ProviderID: prov.ID, AuthType: AuthOAuth, Enabled: true, Secret: []byte{0}}
		if name != "" {
			c.Name = freeName(taken, name, false)
		} else {
			c.Name = freeName(taken, accountStem(prov.Type), true)
		}
		if err := db.InsertConnection(ctx, tx, &c); err != nil {
			return mapDBErr(err, "name", "err.connection_exists")
		}
		cred.Rev, cred.grant = 1, 1
		c.Secret = s.box.Seal(encodeOAuth(cred), connectionAAD(c.ID))
		if err := db.UpdateConnection(ctx, tx, &c); err != nil {
			return err
		}
		out = s.connectionView(c, prov.Name)
		return nil
	})
	if err != nil {
		return Connection{}, false, err
	}
	if err := s.rebuild(ctx); err != nil {
		return Connection{}, false, err
	}
	if existing != 0 {
		for _, fn := range s.newCreds {
			if err := fn(ctx, existing); err != nil {
				return Connection{}, false, err
			}
		}
	}
	return out, existing == 0, nil
}

// neutralAccountName is the stem of the names Claude accounts get: claude-1, claude-2, …
const neutralAccountName = "claude"

// freeName is the first of base, base-2, base-3, … (numbered: base-1, base-2, …) that taken lacks.
// The stem is cut so that the name with its number stays within names.MaxLen characters.
func freeName(taken map[string]bool, base string, numbered bool) string {
	if r := []rune(base); len(r) > names.MaxLen-8 {
		base = strings.TrimSpace(string(r[:names.MaxLen-8]))
	}
	if !numbered && !taken[base] {
		return base
	}
	for i := 1; ; i++ {
		if i == 1 && !numbered {
			continue
		}
		if n := base + "-" + strconv.Itoa(i); !taken[n] {
			return n
		}
	}
}

// neutralNamesKey is set in key_value once the connections named after their account's e-mail
// (as sign-ins named them before) were renamed, so the renaming happens once and a name the
// operator chooses later stays.
const neutralNamesKey = "catalog.oauth_names_neutral"

// renameEmailNamed gives every OAuth connection whose name is its account's e-mail (or the e-mail
// with a -N suffix, as taken names got) the next free neutral name, once per database, and
// returns how many it renamed.
func (s *Service) renameEmailNamed(ctx context.Context) (int, error) {
	if _, done, err := db.GetValue(ctx, s.db.W, neutralNamesKey); err != nil || done {
		return 0, err
	}
	renamed := 0
	err := s.db.WithTx(ctx, func(tx *db.Tx) error {
		rows, err := db.ListConnections(ctx, tx)
		if err != nil {
			return err
		}
		taken := map[int64]map[string]bool{}
		for _, r := range rows {
			if taken[r.ProviderID] == nil {
				taken[r.ProviderID] = map[string]bool{}
			}
			taken[r.ProviderID][r.Name] = true
		}
		for _, r := range rows {
			if r.AuthType != AuthOAuth {
				continue
			}
			cred, err := s.openOAuth(r)
			if err != nil || !namedAfter(r.Name, cred.Account.Email) {
				continue
			}
			r.Name = freeName(taken[r.ProviderID], neutralAccountName, true)
			taken[r.ProviderID][r.Name] = true
			if err := db.UpdateConnection(ctx, tx, &r); err != nil {
				return err
			}
			renamed++
			// Never the old name: it is the e-mail address this renaming keeps out of sight.
			s.log.Info("renamed a Claude connection that was named after its account's e-mail",
				"connection_id", r.ID, "name", r.Name)
		}
		return db.PutValue(ctx, tx, neutralNamesKey, "done")
	})
	if err != nil {
		return 0, err
	}
	return renamed, nil
}

// namedAfter reports whether a connection name is the e-mail address, or the address with the
// -N suffix a taken name got.
func namedAfter(name, email string) bool {
	if email == "" || len(name) < len(email) || !strings.EqualFold(name[:len(email)], email) {
		return false
	}
	rest := name[len(email):]
	if rest == "" {
		return true
	}
	digits, ok := strings.CutPrefix(rest, "-")
	if !ok || digits == "" {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ErrStaleCredential is returned by StoreRefreshed when the connection's credential changed
// since the refresh began (a new sign-in, or the connection is gone).
var ErrStaleCredential = errors.New("the connection's credential changed meanwhile")

// StoreRefreshed commits a refreshed token pair of an OAuth connection, as revision prev+1, only
// while the stored credential is still revision prev of the same account. It returns once the
// pair is committed, so nothing uses a rotated token that a crash could lose. The registry is
// not rebuilt: the token holder serves the new pair, and the next rebuild reads it back.
func (s *Service) StoreRefreshed(ctx context.Context, id, prev int64, cred OAuthCredential) error {
	s.mu.Lock()
	defer s.unlock()
	return s.commit(ctx, func(tx *db.Tx) error {
		row, err := db.GetConnection(ctx, tx, id)
		if errors.Is(err, db.ErrNotFound) {
			return ErrStaleCredential
		}
		if err != nil {
			return err
		}
		old, err := s.openOAuth(row)
		if err != nil || row.AuthType != AuthOAuth || old.Rev != prev || old.Account.UUID != cred.Account.UUID {
			return ErrStaleCredential
		}
		cred.Rev, cred.grant = prev+1, old.grant
		return db.UpdateConnectionSecret(ctx, tx, id, s.box.Seal(encodeOAuth(cred), connectionAAD(id)))
	})
}

// OAuthCredential reads the stored credential of an OAuth connection from the database (not the
// registry, which may hold an older pair).
func (s *Service) OAuthCredential(ctx context.Context, id int64) (OAuthCredential, error) {
	row, err := db.GetConnection(ctx, s.db.W, id)
	if err != nil {
		return OAuthCredential{}, notFound(err, "err.connection_not_found", id)
	}
	if row.AuthType != AuthOAuth {
		return OAuthCredential{}, errs.New(errs.Invalid, "err.not_oauth", id)
	}
	return s.openOAuth(row)
}

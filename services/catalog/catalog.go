// Package catalog owns providers, their connections and the in-memory routing registry built
// from them. Every write goes to SQLite first and then rebuilds the registry, so the proxy path
// reads only memory.
package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"switchyard/db"
	"switchyard/services/announce"
	"switchyard/services/errs"
	"switchyard/services/names"
	"switchyard/services/routing"
	"switchyard/services/secrets"
)

// Provider wire types.
const (
	TypeOpenAI              = "openai"
	TypeOpenAICompatible    = "openai-compatible"
	TypeAnthropic           = "anthropic"
	TypeAnthropicCompatible = "anthropic-compatible"
	// TypeCodex is ChatGPT/Codex subscription accounts: the Codex backend's Responses API.
	TypeCodex = "codex"
	// TypeCopilot is GitHub Copilot accounts: Copilot's chat completions API.
	TypeCopilot = "copilot"
)

// Auth types of a connection.
const (
	AuthAPIKey = "api_key"
	AuthOAuth  = "oauth"
)

// ProviderTypes lists the accepted provider types in display order.
var ProviderTypes = []string{TypeOpenAI, TypeOpenAICompatible, TypeAnthropic, TypeAnthropicCompatible, TypeCodex, TypeCopilot}

// AccountsOnly reports whether a provider type's connections are subscription accounts only,
// added by signing in (codex, copilot): they have no API key.
func AccountsOnly(providerType string) bool {
	return providerType == TypeCodex || providerType == TypeCopilot
}

// TakesAccounts reports whether a provider type's connections may be subscription accounts
// (OAuth connections): anthropic (Claude), codex and copilot.
func TakesAccounts(providerType string) bool {
	return providerType == TypeAnthropic || AccountsOnly(providerType)
}

// accountStem is the stem of the neutral names a provider type's accounts get: claude-1, …
func accountStem(providerType string) string {
	switch providerType {
	case TypeCodex:
		return "chatgpt"
	case TypeCopilot:
		return "copilot"
	}
	return neutralAccountName
}

// Upstream formats: the wire format a provider is sent requests in.
const (
	// UpstreamChat is chat completions (/chat/completions), or messages for the Anthropic types.
	UpstreamChat = "chat"
	// UpstreamResponses is the Responses API (/responses), for the OpenAI types only.
	UpstreamResponses = "responses"
)

// UpstreamFormats lists the upstream formats in display order.
var UpstreamFormats = []string{UpstreamChat, UpstreamResponses}

// DefaultResponsesModels returns the responses_models a provider of this type starts with: for
// openai the models OpenAI serves only on /v1/responses (gpt-5-codex, codex-mini-latest, o1-pro,
// o3-pro and their successors), none for every other type.
func DefaultResponsesModels(providerType string) []string {
	if providerType == TypeOpenAI {
		return []string{"*codex*", "o1-pro*", "o3-pro*"}
	}
	return []string{}
}

// SpeaksOpenAI reports whether providers of a type speak OpenAI's wire formats (and so may be
// sent the Responses API).
func SpeaksOpenAI(providerType string) bool {
	return providerType == TypeOpenAI || providerType == TypeOpenAICompatible || AccountsOnly(providerType)
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Service is the catalog: CRUD on providers and connections plus the live registry.
type Service struct {
	db  *db.DB
	box *secrets.Box
	log *slog.Logger

	mu       sync.Mutex // serialises writes so registry rebuilds see a consistent order
	reg      routing.Published[Registry]
	newCreds []func(ctx context.Context, connectionID int64) error
	deleted  []func(connectionID int64)
	guards   []Guard

	// rows are what the current registry was built from, so Reload can tell what changed;
	// guarded by mu.
	rows loaded
	// commits are the OnCommitted functions and whether a write committed since mu was taken;
	// renamed that New committed the one-time renaming. Both guarded by mu.
	commits announce.Commits
	renamed bool
}

// Change is a catalog change that can break what names providers and connections (combos): a
// provider or connection name that stops existing, or a provider name that starts to.
type Change struct {
	// GoneProvider is a provider whose name stops existing (deleted or renamed); with
	// GoneConnection, only that connection of it stops existing (deleted, renamed or moved to
	// another provider).
	GoneProvider, GoneConnection string
	// NewProvider is a provider name that starts existing (created or renamed).
	NewProvider string
}

// Guard checks a change inside the transaction that writes it (q); an error refuses the change
// and is the answer to it.
type Guard func(ctx context.Context, q db.Querier, ch Change) error

// OnChanging registers a guard, asked before every change of provider and connection names.
func (s *Service) OnChanging(fn Guard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.guards = append(s.guards, fn)
}

// guard asks every guard about a change; the first refusal wins.
func (s *Service) guard(ctx context.Context, q db.Querier, ch Change) error {
	for _, fn := range s.guards {
		if err := fn(ctx, q, ch); err != nil {
			return err
		}
	}
	return nil
}

// OnConnectionDeleted registers fn to run after a connection (or its provider) was deleted, so
// in-memory state keyed by the connection is dropped.
func (s *Service) OnConnectionDeleted(fn func(connectionID int64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted = append(s.deleted, fn)
}

// deleteAndRebuild runs a deletion in one transaction, then rebuilds the registry and calls
// the deletion hooks for the connections that left it; s.mu is held.
func (s *Service) deleteAndRebuild(ctx context.Context, del func(tx *db.Tx) error) error {
	if err := s.commit(ctx, del); err != nil {
		return err
	}
	before := s.reg.Load()
	if err := s.rebuild(ctx); err != nil {
		return err
	}
	s.notifyDeleted(before)
	return nil
}

// notifyDeleted calls the deletion hooks for connections that left the registry.
func (s *Service) notifyDeleted(before *Registry) {
	after := s.reg.Load()
	for id := range before.conns {
		if _, ok := after.conns[id]; !ok {
			for _, fn := range s.deleted {
				fn(id)
			}
		}
	}
}

// OnNewCredentials registers fn to run when a connection gets a new credential (which clears
// terminal states such as expired or banned). The update answers only after every fn returned,
// so fn commits what it changed before it returns; its error fails the update's answer.
func (s *Service) OnNewCredentials(fn func(ctx context.Context, connectionID int64) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.newCreds = append(s.newCreds, fn)
}

// New loads the registry from the database.
func New(ctx context.Context, d *db.DB, box *secrets.Box, log *slog.Logger) (*Service, error) {
	s := &Service{db: d, box: box, log: log, commits: announce.New(Topic)}
	renamed, err := s.renameEmailNamed(ctx)
	if err != nil {
		return nil, fmt.Errorf("rename connections named after e-mails: %w", err)
	}
	s.renamed = renamed > 0
	if err := s.rebuild(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Registry returns the current immutable routing registry.
func (s *Service) Registry() *Registry { return s.reg.Load() }

// OnChange registers fn to run after every registry rebuild (and is not called for the current one).
func (s *Service) OnChange(fn func(*Registry)) { s.reg.OnChange(fn) }

// rebuild reads every provider and connection and swaps in a new registry.
func (s *Service) rebuild(ctx context.Context) error {
	rows, err := s.read(ctx)
	if err != nil {
		return err
	}
	s.swap(rows)
	return nil
}

// read reads every provider and connection.
func (s *Service) read(ctx context.Context) (loaded, error) {
	provs, err := db.ListProviders(ctx, s.db.W)
	if err != nil {
		return loaded{}, err
	}
	conns, err := db.ListConnections(ctx, s.db.W)
	if err != nil {
		return loaded{}, err
	}
	return loaded{provs: provs, conns: conns}, nil
}

// swap builds the registry of rows and publishes it; s.mu is held (or the service is new).
func (s *Service) swap(rows loaded) {
	s.rows = rows
	s.reg.Store(buildRegistry(rows.provs, rows.conns, s.open, s.log, s.reg.Load()))
}

func (s *Service) open(c db.Connection) (string, error) {
	b, err := s.box.Open(c.Secret, connectionAAD(c.ID))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func connectionAAD(id int64) []byte { return fmt.Appendf(nil, "connection:%d", id) }

// ---- providers ----

// Provider is the public view of a provider.
type Provider struct {
	ID         int64           `json:"id"`
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	BaseURL    string          `json:"base_url"`
	Resilience json.RawMessage `json:"resilience"`
	// ResponsesAPI: the upstream serves /responses itself (openai-compatible providers; openai
	// always does), so Responses requests pass through.
	ResponsesAPI bool `json:"responses_api"`
	// ListedModelsOnly: model names the provider's model list does not show are refused (404
	// model_not_found) instead of forwarded. Default false: the upstream decides.
	ListedModelsOnly bool `json:"listed_models_only"`
	// Strategy orders the provider's connections: priority (the default: lower priority first,
	// round robin among equals) or one of the combo strategies (routing.Strategies).
	Strategy string `json:"strategy"`
	// UpstreamFormat is the wire format requests are sent in: chat (the default: chat
	// completions, or messages for the Anthropic types) or responses (the Responses API; the
	// OpenAI types only).
	UpstreamFormat string `json:"upstream_format"`
	// ResponsesModels are the model patterns a provider of type openai sends to /v1/responses
	// even when its upstream format is chat (default DefaultResponsesModels; never null).
	ResponsesModels []string `json:"responses_models"`
	CreatedAt       int64    `json:"created_at"`
	UpdatedAt       int64    `json:"updated_at"`
}

// ProviderInput is a create or partial update; nil fields are left as they are.
type ProviderInput struct {
	Name             *string         `json:"name"`
	Type             *string         `json:"type"`
	BaseURL          *string         `json:"base_url"`
	Resilience       json.RawMessage `json:"resilience"`
	ResponsesAPI     *bool           `json:"responses_api"`
	ListedModelsOnly *bool           `json:"listed_models_only"`
	Strategy         *string         `json:"strategy"`
	UpstreamFormat   *string         `json:"upstream_format"`
	// ResponsesModels replaces the list when set ([] clears it); absent keeps it, except that a
	// change of type resets it to the new type's default.
	ResponsesModels *[]string `json:"responses_models"`
}

// ProviderOverridesValidator checks a provider's resilience override document and returns it
// in canonical form, or per-field messages. Set by the composition root.
type ProviderOverridesValidator func(raw []byte) ([]byte, map[string]errs.Msg)

func providerView(p db.Provider) Provider {
	return Provider{ID: p.ID, Name: p.Name, Type: p.Type, BaseURL: p.BaseURL,
		Resilience: json.RawMessage(p.Resilience), ResponsesAPI: p.ResponsesAPI, ListedModelsOnly: p.ListedModelsOnly,
		Strategy: p.Strategy, UpstreamFormat: p.UpstreamFormat, ResponsesModels: decodePatterns(p.ResponsesModels),
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

// decodePatterns reads a stored responses_models column; never nil.
func decodePatterns(raw string) []string {
	out := []string{}
	_ = json.Unmarshal([]byte(raw), &out) // written by applyProvider; "" or damage reads as none
	if out == nil {
		out = []string{}
	}
	return out
}

// ListProviders returns every provider.
func (s *Service) ListProviders(ctx context.Context) ([]Provider, error) {
	rows, err := db.ListProviders(ctx, s.db.R)
	if err != nil {
		return nil, err
	}
	out := make([]Provider, len(rows))
	for i, r := range rows {
		out[i] = providerView(r)
	}
	return out, nil
}

// GetProvider returns one provider.
func (s *Service) GetProvider(ctx context.Context, id int64) (Provider, error) {
	p, err := db.GetProvider(ctx, s.db.R, id)
	if err != nil {
		return Provider{}, notFound(err, "err.provider_not_found", id)
	}
	return providerView(p), nil
}

// CreateProvider validates and stores a new provider.
func (s *Service) CreateProvider(ctx context.Context, in ProviderInput, validate ProviderOverridesValidator) (Provider, error) {
	var p db.Provider
	if err := applyProvider(&p, in, true, validate); err != nil {
		return Provider{}, err
	}
	s.mu.Lock()
	defer s.unlock()
	err := s.commit(ctx, func(tx *db.Tx) error {
		if err := s.guard(ctx, tx, Change{NewProvider: p.Name}); err != nil {
			return err
		}
		return mapDBErr(db.InsertProvider(ctx, tx, &p), "name", "err.provider_exists")
	})
	if err != nil {
		return Provider{}, err
	}
	return providerView(p), s.rebuild(ctx)
}

// UpdateProvider applies a partial update.
func (s *Service) UpdateProvider(ctx context.Context, id int64, in ProviderInput, validate ProviderOverridesValidator) (Provider, error) {
	s.mu.Lock()
	defer s.unlock()
	var p db.Provider
	err := s.commit(ctx, func(tx *db.Tx) error {
		var err error
		p, err = db.GetProvider(ctx, tx, id)
		if err != nil {
			return notFound(err, "err.provider_not_found", id)
		}
		old := p.Name
		if err := applyProvider(&p, in, false, validate); err != nil {
			return err
		}
		if p.Name != old {
			if err := s.guard(ctx, tx, Change{GoneProvider: old, NewProvider: p.Name}); err != nil {
				return err
			}
		}
		return mapDBErr(db.UpdateProvider(ctx, tx, &p), "name", "err.provider_exists")
	})
	if err != nil {
		return Provider{}, err
	}
	return providerView(p), s.rebuild(ctx)
}

// DeleteProvider removes a provider and its connections.
func (s *Service) DeleteProvider(ctx context.Context, id int64) error {
	s.mu.Lock()
	defer s.unlock()
	return s.deleteAndRebuild(ctx, func(tx *db.Tx) error {
		p, err := db.GetProvider(ctx, tx, id)
		if err != nil {
			return mapDBErr(err, "", "")
		}
		if err := s.guard(ctx, tx, Change{GoneProvider: p.Name}); err != nil {
			return err
		}
		return mapDBErr(db.DeleteProvider(ctx, tx, id), "", "")
	})
}

func applyProvider(p *db.Provider, in ProviderInput, create bool, validate ProviderOverridesValidator) error {
	fields := map[string]errs.Msg{}
	if in.Name != nil {
		p.Name = strings.TrimSpace(*in.Name)
	}
	typeChanged := create
	if in.Type != nil {
		t := strings.TrimSpace(*in.Type)
		typeChanged = typeChanged || t != p.Type
		p.Type = t
	}
	if in.BaseURL != nil {
		p.BaseURL = strings.TrimRight(strings.TrimSpace(*in.BaseURL), "/")
	}
	if in.ResponsesAPI != nil {
		p.ResponsesAPI = *in.ResponsesAPI
	}
	if in.ListedModelsOnly != nil {
		p.ListedModelsOnly = *in.ListedModelsOnly
	}
	if in.Strategy != nil {
		p.Strategy = strings.TrimSpace(*in.Strategy)
		if !routing.Strategy(p.Strategy).Valid() {
			fields["strategy"] = errs.M("err.one_of", routing.StrategyNames())
		}
	}
	if p.Strategy == "" {
		p.Strategy = string(routing.Priority)
	}
	if create || in.Name != nil {
		if m, bad := names.Check(p.Name); bad {
			fields["name"] = m
		} else if !nameRE.MatchString(p.Name) {
			fields["name"] = errs.M("err.provider_name")
		}
	}
	if create || in.Type != nil {
		if !validType(p.Type) {
			fields["type"] = errs.M("err.one_of", strings.Join(ProviderTypes, ", "))
		}
	}
	if create || in.BaseURL != nil {
		if p.BaseURL == "" && AccountsOnly(p.Type) {
			// none: the account kind's own address from the OAuth settings (codex.api_base_url;
			// for copilot the address its token names)
		} else if msg, bad := checkBaseURL(p.BaseURL); bad {
			fields["base_url"] = msg
		}
	}
	applyUpstreamFormat(p, in, typeChanged, fields)
	applyOverrides(&p.Resilience, in.Resilience, "resilience", validate, fields)
	if len(fields) > 0 {
		return errs.Fields(fields)
	}
	return nil
}

// applyUpstreamFormat sets and checks upstream_format and responses_models. The Responses API is
// OpenAI's, so only the OpenAI types may be sent it, and only type openai picks models for it by
// pattern (an openai-compatible server either speaks it for every model or not at all). A change
// of type without a new list takes the new type's default list.
func applyUpstreamFormat(p *db.Provider, in ProviderInput, typeChanged bool, fields map[string]errs.Msg) {
	if in.UpstreamFormat != nil {
		p.UpstreamFormat = strings.TrimSpace(*in.UpstreamFormat)
		if p.UpstreamFormat != UpstreamChat && p.UpstreamFormat != UpstreamResponses {
			fields["upstream_format"] = errs.M("err.one_of", strings.Join(UpstreamFormats, ", "))
		}
	}
	if p.UpstreamFormat == "" {
		p.UpstreamFormat = UpstreamChat
	}
	if p.Type == TypeCodex { // the Codex backend speaks nothing else
		if in.UpstreamFormat != nil && p.UpstreamFormat != UpstreamResponses {
			fields["upstream_format"] = errs.M("err.upstream_format_codex")
		}
		p.UpstreamFormat = UpstreamResponses
	}
	known := validType(p.Type)
	if _, bad := fields["upstream_format"]; !bad && known && p.UpstreamFormat == UpstreamResponses && !SpeaksOpenAI(p.Type) {
		fields["upstream_format"] = errs.M("err.upstream_format_type", p.Type)
	}
	switch {
	case in.ResponsesModels != nil:
		list := *in.ResponsesModels
		if len(list) > MaxResponsesModels {
			fields["responses_models"] = errs.M("err.responses_models_too_many", MaxResponsesModels)
		} else if len(list) > 0 && known && p.Type != TypeOpenAI {
			fields["responses_models"] = errs.M("err.responses_models_type", p.Type)
		}
		kept := make([]string, 0, len(list))
		for i, pat := range list {
			pat = strings.TrimSpace(pat)
			if m, bad := checkResponsesModel(pat); bad {
				fields["responses_models["+strconv.Itoa(i)+"]"] = m
				continue
			}
			if !slices.Contains(kept, pat) {
				kept = append(kept, pat)
			}
		}
		p.ResponsesModels = encodePatterns(kept)
	case typeChanged:
		p.ResponsesModels = encodePatterns(DefaultResponsesModels(p.Type))
	}
}

// encodePatterns is how responses_models is stored: a JSON array.
func encodePatterns(list []string) string {
	b, _ := json.Marshal(list) // strings always encode
	return string(b)
}

func validType(t string) bool {
	for _, v := range ProviderTypes {
		if t == v {
			return true
		}
	}
	return false
}

func checkBaseURL(s string) (errs.Msg, bool) {
	if s == "" {
		return errs.M("err.required"), true
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errs.M("err.base_url"), true
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errs.M("err.base_url_query"), true
	}
	if u.User != nil {
		// The address is shown on the dashboard and stored in the clear; a credential belongs in
		// a connection, where it is sealed and never shown again.
		return errs.M("err.base_url_userinfo"), true
	}
	return errs.Msg{}, false
}

// applyOverrides writes an override document of a create or update (raw) to *dst: absent keeps
// it, null clears it to {}, anything else is checked by validate and stored in its canonical
// form (without a validator, any JSON object is stored as it came). What is wrong goes to fields
// under field ("field.key" for the validator's messages).
func applyOverrides(dst *string, raw json.RawMessage, field string, validate func(raw []byte) ([]byte, map[string]errs.Msg),
	fields map[string]errs.Msg) {
	if len(raw) == 0 {
		return
	}
	if string(raw) == "null" {
		*dst = "{}"
		return
	}
	if validate == nil {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			fields[field] = errs.M("err.json_object")
		} else {
			*dst = string(raw)
		}
		return
	}
	canon, ferr := validate(raw)
	for k, v := range ferr {
		fields[field+"."+k] = v
	}
	if len(ferr) == 0 {
		*dst = string(canon)
	}
}

// notFound is err, or the not_found error with the message key and args when the row is
// missing.
func notFound(err error, key string, args ...any) error {
	if errors.Is(err, db.ErrNotFound) {
		return errs.New(errs.NotFound, key, args...)
	}
	return err
}

func mapDBErr(err error, field, conflictKey string) error {
	switch {
	case errors.Is(err, db.ErrNotFound):
		return errs.Wrap(err, errs.NotFound, "err.not_found")
	case errors.Is(err, db.ErrConflict):
		if field != "" {
			e := errs.Field(field, conflictKey)
			e.Code, e.Msg, e.Err = errs.Conflict, errs.M(conflictKey), err
			return e
		}
		return errs.Wrap(err, errs.Conflict, "err.conflict")
	}
	return err
}

package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"

	"golang.org/x/sync/singleflight"

	"switchyard/services/catalog"
	"switchyard/services/redact"
)

// Model is one entry of the model inventory.
type Model struct {
	ID       string // provider/model
	Provider string
	Name     string // the upstream's own model id
	Created  int64
}

type providerModels struct {
	names     []string
	set       map[string]struct{}
	ok        bool // the last refresh succeeded
	everOK    bool // some refresh succeeded since start
	fetchedAt time.Time
	lastTry   time.Time
	err       string
	cause     *FetchError
}

// Inventory discovers which models each provider serves by asking its /models endpoint, at start,
// after catalog changes, periodically and on demand for a model it has not seen.
type Inventory struct {
	client *http.Client
	reg    func() *catalog.Registry
	log    *slog.Logger
	clock  clockwork.Clock

	// Tokens gives OAuth connections their bearer token, Copilot gives Copilot accounts their
	// Copilot token and OAuthSettings names the account kinds' addresses and headers; set them
	// before Run (nil: none, and those connections have no model list).
	Tokens        TokenSource
	Copilot       CopilotTokens
	OAuthSettings OAuthSettingsSource

	mu         sync.RWMutex
	byProvider map[string]*providerModels
	// byModel is, for each model a provider's inventory lists, the providers listing it,
	// sorted: ServedBy is asked on every request naming a bare model. Made anew (never
	// changed in place: ServedBy's callers keep the slices) whenever an inventory changes.
	byModel map[string][]string
	sf      singleflight.Group
	kick    chan struct{}
}

// NewInventory builds an empty inventory; Run fills it.
func NewInventory(client *http.Client, reg func() *catalog.Registry, log *slog.Logger, clock clockwork.Clock) *Inventory {
	return &Inventory{client: noRedirects(client), reg: reg, log: log, clock: clock,
		byProvider: map[string]*providerModels{}, kick: make(chan struct{}, 1)}
}

// Kick asks Run to refresh every provider soon (e.g. after a connection was added).
func (i *Inventory) Kick() {
	select {
	case i.kick <- struct{}{}:
	default:
	}
}

// Intervals says how often models are refreshed: every provider each refresh interval, and the
// providers whose last refresh failed each recheck interval (0 = no rechecks).
type Intervals func() (refresh, recheck time.Duration)

// Run refreshes every provider now, then on the intervals and whenever kicked, until ctx ends.
func (i *Inventory) Run(ctx context.Context, intervals Intervals) {
	i.RefreshAll(ctx)
	lastAll := i.clock.Now()
	for {
		refresh, recheck := intervals()
		wait := lastAll.Add(refresh).Sub(i.clock.Now())
		failedOnly := false
		if recheck > 0 && recheck < wait && i.anyFailing() {
			wait, failedOnly = recheck, true
		}
		t := i.clock.NewTimer(max(wait, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		case <-i.kick:
			t.Stop()
			failedOnly = false
		}
		if failedOnly {
			i.RefreshFailing(ctx)
			continue
		}
		i.RefreshAll(ctx)
		lastAll = i.clock.Now()
	}
}

func (i *Inventory) anyFailing() bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	for _, pm := range i.byProvider {
		if !pm.ok {
			return true
		}
	}
	return false
}

// RefreshFailing refreshes only the providers whose last refresh failed.
func (i *Inventory) RefreshFailing(ctx context.Context) {
	i.refreshWhere(ctx, func(p *catalog.ProviderEntry) bool {
		i.mu.RLock()
		defer i.mu.RUnlock()
		pm := i.byProvider[p.Name]
		return pm != nil && !pm.ok
	})
}

// RefreshAll refreshes every provider that has a usable connection, concurrently, and forgets
// providers that were deleted or have no connection left.
func (i *Inventory) RefreshAll(ctx context.Context) {
	reg := i.reg()
	i.refreshWhere(ctx, func(*catalog.ProviderEntry) bool { return true })
	i.mu.Lock()
	for name := range i.byProvider {
		if p, ok := reg.Provider(name); !ok || len(p.Conns) == 0 {
			delete(i.byProvider, name)
		}
	}
	i.reindex()
	i.mu.Unlock()
}

// refreshWhere refreshes, concurrently, the providers with a usable connection that want says.
func (i *Inventory) refreshWhere(ctx context.Context, want func(*catalog.ProviderEntry) bool) {
	var wg sync.WaitGroup
	for _, p := range i.reg().Providers() {
		if len(p.Conns) == 0 || !want(p) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = i.Refresh(ctx, p)
		}()
	}
	wg.Wait()
}

// Refresh asks one provider for its models; concurrent calls for one provider share one request.
func (i *Inventory) Refresh(ctx context.Context, p *catalog.ProviderEntry) error {
	_, err, _ := i.sf.Do(p.Name, func() (any, error) {
		names, err := i.fetch(ctx, p)
		now := i.clock.Now()
		i.mu.Lock()
		defer i.mu.Unlock()
		pm := i.byProvider[p.Name]
		if pm == nil {
			pm = &providerModels{}
			i.byProvider[p.Name] = pm
		}
		pm.lastTry = now
		if err != nil {
			pm.ok = false
			pm.err, pm.cause = err.Error(), AsFetchError(err)
			i.log.Warn("model discovery failed", "provider", p.Name, "error", err)
			return nil, err
		}
		pm.names, pm.ok, pm.everOK, pm.err, pm.cause, pm.fetchedAt = names, true, true, "", nil, now
		pm.set = make(map[string]struct{}, len(names))
		for _, n := range names {
			pm.set[n] = struct{}{}
		}
		i.reindex()
		return nil, nil
	})
	return err
}

// RefreshIfStale refreshes one provider on demand unless it was tried within minGap.
func (i *Inventory) RefreshIfStale(ctx context.Context, p *catalog.ProviderEntry, minGap time.Duration) {
	i.mu.RLock()
	pm := i.byProvider[p.Name]
	fresh := pm != nil && i.clock.Now().Sub(pm.lastTry) < minGap
	i.mu.RUnlock()
	if !fresh && len(p.Conns) > 0 {
		_ = i.Refresh(ctx, p)
	}
}

// Lookup reports whether the provider's last good inventory lists model; listed is false when
// the provider has no good inventory at all (unknown, so requests are still sent).
func (i *Inventory) Lookup(provider, model string) (found, listed bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	pm := i.byProvider[provider]
	if pm == nil || pm.set == nil {
		return false, false
	}
	_, found = pm.set[model]
	return found, true
}

// ServedBy returns the providers whose inventory lists this bare model name, sorted. The
// slice is shared: callers only read it.
func (i *Inventory) ServedBy(model string) []string {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.byModel[model]
}

// reindex makes byModel anew from the inventories; the caller holds mu for writing.
func (i *Inventory) reindex() {
	m := make(map[string][]string, len(i.byModel))
	for name, pm := range i.byProvider {
		for n := range pm.set {
			m[n] = append(m[n], name)
		}
	}
	for _, provs := range m {
		sort.Strings(provs)
	}
	i.byModel = m
}

// List returns the union of the providers' models as provider/model, sorted. A provider whose
// last refresh failed is left out, unless every provider is failing: then the last known
// inventory stays listed rather than an empty one.
func (i *Inventory) List() []Model {
	i.mu.RLock()
	defer i.mu.RUnlock()
	allFailing := true
	for _, pm := range i.byProvider {
		if pm.ok {
			allFailing = false
			break
		}
	}
	var out []Model
	for prov, pm := range i.byProvider {
		if !pm.ok && !allFailing {
			continue
		}
		for _, n := range pm.names {
			out = append(out, Model{ID: prov + "/" + n, Provider: prov, Name: n, Created: pm.fetchedAt.Unix()})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// Status is the discovery state of one provider, for the dashboard.
type Status struct {
	OK        bool
	EverOK    bool
	Models    int
	FetchedAt time.Time
	Error     string
	Cause     *FetchError // Error in parts; nil when the last refresh worked
}

// ProviderStatus returns the discovery state of one provider.
func (i *Inventory) ProviderStatus(provider string) (Status, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	pm := i.byProvider[provider]
	if pm == nil {
		return Status{}, false
	}
	return Status{OK: pm.ok, EverOK: pm.everOK, Models: len(pm.names), FetchedAt: pm.fetchedAt, Error: pm.err, Cause: pm.cause}, true
}

func (i *Inventory) fetch(ctx context.Context, p *catalog.ProviderEntry) ([]string, error) {
	if len(p.Conns) == 0 {
		return nil, &FetchError{Kind: "no_connection"}
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var lastErr error
	// Any working credential will do; try them in priority order.
	auth := ModelAuth{Tokens: i.Tokens, Copilot: i.Copilot, OAuth: i.OAuthSettings}
	for _, c := range p.Conns {
		names, err := FetchModels(ctx, i.client, p, c, auth)
		if err == nil {
			return names, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// ModelAuth is what a model list call needs besides the connection: the bearer tokens of OAuth
// connections, the Copilot tokens of Copilot accounts and the OAuth settings (the Codex
// backend's address, Copilot's headers). A connection whose kind needs one that is nil has no
// model list.
type ModelAuth struct {
	Tokens  TokenSource
	Copilot CopilotTokens
	OAuth   OAuthSettingsSource
}

// codexClientVersion is the Codex CLI version the Codex backend's model list is asked as; it
// answers the models that version may use.
const codexClientVersion = "0.99.0"

// FetchModels asks one provider, with one connection's credential, which models it serves: the
// ids of an OpenAI- or Anthropic-style list, or the slugs of the Codex backend's.
func FetchModels(ctx context.Context, client *http.Client, p *catalog.ProviderEntry, c *catalog.ConnEntry, auth ModelAuth) ([]string, error) {
	req, token, err := modelsRequest(ctx, p, c, auth)
	if err != nil {
		return nil, err
	}
	secrets := fetchSecrets(c, token, auth.Tokens)
	resp, err := noRedirects(client).Do(req)
	if err != nil {
		return nil, transportFetchError(err)
	}
	defer resp.Body.Close()
	if isRedirect(resp.StatusCode) {
		return nil, &FetchError{Kind: "redirect", Status: resp.StatusCode,
			Excerpt: redact.Redirect(req.URL, resp.Header.Get("Location"), secrets...)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, transportFetchError(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &FetchError{Kind: "status", Status: resp.StatusCode, Excerpt: snippet(redact.Bytes(body, secrets...))}
	}
	var doc struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		Models []struct {
			Slug string `json:"slug"`
		} `json:"models"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, &FetchError{Kind: "not_a_list", Err: err}
	}
	if p.Type == catalog.TypeCodex && doc.Data == nil && doc.Models == nil {
		return nil, &FetchError{Kind: "not_a_list", Err: errors.New("the answer has no models")}
	}
	seen := make(map[string]bool, len(doc.Data)+len(doc.Models))
	names := make([]string, 0, len(doc.Data)+len(doc.Models))
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for _, d := range doc.Data {
		add(d.ID)
	}
	for _, m := range doc.Models {
		add(m.Slug)
	}
	sort.Strings(names)
	return names, nil
}

// modelsRequest is the model list call on c and the token it carries ("" for an API key): an
// API key or Claude token on the provider's /models, a ChatGPT account's on the Codex backend's
// /models, a Copilot account's Copilot token on the /models of the address that token names.
func modelsRequest(ctx context.Context, p *catalog.ProviderEntry, c *catalog.ConnEntry, auth ModelAuth) (*http.Request, string, error) {
	account := c.AuthType == catalog.AuthOAuth
	switch {
	case account && p.Type == catalog.TypeCopilot:
		if auth.Copilot == nil || auth.OAuth == nil {
			return nil, "", &FetchError{Kind: "transport", Err: errNoAccountHolder}
		}
		token, base, err := auth.Copilot.CopilotToken(ctx, c)
		if err != nil {
			return nil, "", &FetchError{Kind: "transport", Err: err}
		}
		if base == "" {
			base = defaultCopilotAPI
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
		if err != nil {
			return nil, "", err
		}
		copilotHeaders(req.Header, token, auth.OAuth.Snapshot().Copilot())
		req.Header.Set("Accept", "application/json")
		return req, token, nil
	case account && p.Type == catalog.TypeCodex:
		if auth.Tokens == nil || auth.OAuth == nil {
			return nil, "", &FetchError{Kind: "transport", Err: errNoAccountHolder}
		}
		token, err := auth.Tokens.Token(ctx, c)
		if err != nil {
			return nil, "", &FetchError{Kind: "transport", Err: err}
		}
		base := p.BaseURL
		if base == "" {
			base = auth.OAuth.Snapshot().Codex().APIBaseURL
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models?client_version="+codexClientVersion, nil)
		if err != nil {
			return nil, "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "application/json")
		if c.OAuth != nil && c.OAuth.Account.UUID != "" {
			req.Header.Set("chatgpt-account-id", c.OAuth.Account.UUID)
		}
		return req, token, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, modelsURL(p), nil)
	if err != nil {
		return nil, "", err
	}
	token, err := authorize(ctx, req.Header, p, c, auth.Tokens)
	if err != nil {
		return nil, "", &FetchError{Kind: "transport", Err: err}
	}
	return req, token, nil
}

// errNoAccountHolder: the gateway runs without the account service this connection's kind needs.
var errNoAccountHolder = errors.New("no account service for this kind of account")

func modelsURL(p *catalog.ProviderEntry) string {
	if isAnthropic(p.Type) {
		return p.BaseURL + "/v1/models?limit=1000"
	}
	return p.BaseURL + "/models"
}

func isAnthropic(t string) bool {
	return t == catalog.TypeAnthropic || t == catalog.TypeAnthropicCompatible
}

// setAuth puts the connection's credential on an upstream request in the provider's style.
func setAuth(h http.Header, p *catalog.ProviderEntry, c *catalog.ConnEntry) {
	if isAnthropic(p.Type) {
		h.Set("x-api-key", c.APIKey.Reveal())
		if h.Get("anthropic-version") == "" {
			h.Set("anthropic-version", anthropicVersion)
		}
		return
	}
	h.Set("Authorization", "Bearer "+c.APIKey.Reveal())
}

// snippet shortens an upstream body for an error message.
func snippet(b []byte) string {
	const max = 300
	if len(b) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(b[cut]) { // never split a character
			cut--
		}
		return string(b[:cut]) + "…"
	}
	return string(b)
}

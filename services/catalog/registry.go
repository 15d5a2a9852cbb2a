package catalog

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"switchyard/db"
	"switchyard/services/glob"
	"switchyard/services/routing"
	"switchyard/services/settings"
)

// Secret holds a decrypted credential in memory. Every way of printing it prints a placeholder;
// only Reveal gives the value, for the one place that puts it on an upstream request.
type Secret string

// Reveal returns the credential itself.
func (s Secret) Reveal() string { return string(s) }

// String hides the value from fmt.
func (Secret) String() string { return "[redacted]" }

// GoString hides the value from %#v.
func (Secret) GoString() string { return "[redacted]" }

// LogValue hides the value from slog.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// MarshalJSON hides the value from JSON.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// Registry is an immutable routing table: providers by name with their usable connections.
type Registry struct {
	byName  map[string]*ProviderEntry
	ordered []*ProviderEntry
	conns   map[int64]*ConnEntry
	// depthOverrides is set when some connection overrides request_queue.max_queue_depth.
	depthOverrides bool
}

// QueueDepthOverrides reports whether any connection sets its own queue depth.
func (r *Registry) QueueDepthOverrides() bool { return r.depthOverrides }

// ProviderEntry is one provider as the proxy sees it.
type ProviderEntry struct {
	ID      int64
	Name    string
	Type    string
	BaseURL string
	// ResponsesAPI: the upstream serves /responses itself (as stored, or implied by an upstream
	// format of responses).
	ResponsesAPI bool
	// ListedModelsOnly: a model the provider's model list does not show is refused, not
	// forwarded.
	ListedModelsOnly bool
	// Strategy orders the connections (routing's names; priority by default).
	Strategy  routing.Strategy
	Overrides json.RawMessage // per-provider resilience overrides, as stored
	// UpstreamFormat is UpstreamChat (default) or UpstreamResponses; see SendsResponses.
	UpstreamFormat string
	// ResponsesModels are the provider's responses_models as stored, for display; the request
	// path uses their compiled form (openai providers only).
	ResponsesModels []string
	responsesGlobs  []*glob.Pattern
	// Resilience is Overrides decoded once, for the request path.
	Resilience settings.ProviderOverrides
	// Conns are the enabled connections whose credential could be opened, by priority then id.
	Conns []*ConnEntry
	rr    *atomic.Uint64 // round-robin cursor, carried across rebuilds by provider name
}

// ConnEntry is one connection as the proxy sees it.
type ConnEntry struct {
	ID         int64
	ProviderID int64
	Provider   string
	// ProviderType is the provider's type: for an OAuth connection, the kind of account.
	ProviderType  string
	Name          string
	AuthType      string
	APIKey        Secret
	Priority      int
	MaxConcurrent int // 0 = unlimited
	Overrides     json.RawMessage
	// Settings is Overrides decoded once, for the request path.
	Settings settings.ConnectionOverrides
	Enabled  bool
	// Broken says why the connection cannot be used (e.g. its secret no longer opens); "" if fine.
	Broken string
	// OAuth is the credential of an OAuth connection as stored when the registry was built (a
	// refresh since may have rotated it: the engine asks the token holder); nil for API keys.
	// APIKey then holds its access token.
	OAuth *OAuthCredential
	// LowPriorityLane and LimitReset are the Claude subscription toggles.
	LowPriorityLane bool
	LimitReset      bool
	// Label is the connection as clients and metrics name it (ClientLabel): never an e-mail.
	Label string
}

// ClientLabel is how a connection is named wherever someone other than an operator may read it:
// error messages and diagnostics on the proxy surfaces, and Prometheus labels (a scrape is often
// stored and shown far from the dashboard). It is the connection's name, unless the name contains
// an '@': then it could be an account's e-mail address, which only operators see, and the label
// is "#" and the connection's id instead.
func ClientLabel(id int64, name string) string {
	if strings.Contains(name, "@") {
		return "#" + strconv.FormatInt(id, 10)
	}
	return name
}

func buildRegistry(provs []db.Provider, conns []db.Connection, open func(db.Connection) (string, error),
	log *slog.Logger, old *Registry) *Registry {
	r := &Registry{byName: make(map[string]*ProviderEntry, len(provs)), conns: make(map[int64]*ConnEntry, len(conns))}
	byID := make(map[int64]*ProviderEntry, len(provs))
	for _, p := range provs {
		e := &ProviderEntry{ID: p.ID, Name: p.Name, Type: p.Type, BaseURL: p.BaseURL,
			ResponsesAPI:     p.ResponsesAPI || p.UpstreamFormat == UpstreamResponses,
			ListedModelsOnly: p.ListedModelsOnly, Strategy: routing.Strategy(p.Strategy), Overrides: json.RawMessage(p.Resilience),
			rr:         new(atomic.Uint64),
			Resilience: settings.ParseProviderOverrides([]byte(p.Resilience))}
		e.setFormat(p.UpstreamFormat, decodePatterns(p.ResponsesModels), log)
		if old != nil {
			if prev, ok := old.byName[p.Name]; ok {
				e.rr = prev.rr
			}
		}
		r.byName[p.Name] = e
		r.ordered = append(r.ordered, e)
		byID[p.ID] = e
	}
	for _, c := range conns {
		p := byID[c.ProviderID]
		if p == nil {
			continue
		}
		ce := &ConnEntry{ID: c.ID, ProviderID: c.ProviderID, Provider: p.Name, ProviderType: p.Type, Name: c.Name, AuthType: c.AuthType,
			Priority: c.Priority, Overrides: json.RawMessage(c.Overrides), Enabled: c.Enabled,
			Settings:        settings.ParseConnectionOverrides([]byte(c.Overrides)),
			LowPriorityLane: c.LowPriorityLane, LimitReset: c.LimitReset}
		ce.Label = ClientLabel(c.ID, c.Name)
		if c.MaxConcurrent.Valid {
			ce.MaxConcurrent = int(c.MaxConcurrent.Int64)
		}
		key, err := open(c)
		if err == nil && c.AuthType == AuthOAuth {
			var cred OAuthCredential
			if cred, err = decodeOAuth([]byte(key)); err == nil {
				ce.OAuth, key = &cred, cred.AccessToken.Reveal()
			}
		}
		if err != nil {
			ce.Broken = "credential cannot be decrypted; re-enter the API key"
			log.Warn("connection credential unusable", "connection_id", c.ID, "provider", p.Name, "error", err)
		}
		ce.APIKey = Secret(key)
		r.conns[c.ID] = ce
		if ce.Settings.RequestQueue.MaxQueueDepth != nil {
			r.depthOverrides = true
		}
		if ce.Enabled && ce.Broken == "" {
			p.Conns = append(p.Conns, ce)
		}
	}
	for _, p := range r.ordered {
		sort.SliceStable(p.Conns, func(i, j int) bool {
			if p.Conns[i].Priority != p.Conns[j].Priority {
				return p.Conns[i].Priority < p.Conns[j].Priority
			}
			return p.Conns[i].ID < p.Conns[j].ID
		})
	}
	return r
}

// setFormat sets the upstream format and compiles the responses_models patterns (they count
// for type openai only). A pattern that does not compile (it passed validation when it was
// stored, so only a hand-edited database has one) is left out and logged.
func (p *ProviderEntry) setFormat(format string, patterns []string, log *slog.Logger) {
	p.UpstreamFormat, p.ResponsesModels = format, patterns
	if p.UpstreamFormat == "" {
		p.UpstreamFormat = UpstreamChat
	}
	if p.Type != TypeOpenAI {
		return
	}
	for _, src := range patterns {
		g, err := glob.Compile(src, true)
		if err != nil {
			err = fmt.Errorf("model pattern %q: %w", src, err)
			log.Warn("responses_models pattern ignored", "provider", p.Name, "error", err)
			continue
		}
		p.responsesGlobs = append(p.responsesGlobs, g)
	}
}

// SendsResponses reports whether a request for model (the upstream model id, without the
// provider's name before it) goes to the provider's /responses: always when its upstream format
// is responses; for type openai also when one of its responses_models patterns matches the model,
// ignoring case. It reads only the entry and allocates nothing.
func (p *ProviderEntry) SendsResponses(model string) bool {
	if p.UpstreamFormat == UpstreamResponses {
		return true
	}
	for i := range p.responsesGlobs {
		if p.responsesGlobs[i].Match(model) {
			return true
		}
	}
	return false
}

// Provider returns the provider with this name.
func (r *Registry) Provider(name string) (*ProviderEntry, bool) {
	p, ok := r.byName[name]
	return p, ok
}

// Providers returns every provider ordered by name.
func (r *Registry) Providers() []*ProviderEntry { return r.ordered }

// Connection returns any connection by id, usable or not.
func (r *Registry) Connection(id int64) (*ConnEntry, bool) {
	c, ok := r.conns[id]
	return c, ok
}

// ConnectionsOf returns every connection of a provider, usable or not, by priority then id.
func (r *Registry) ConnectionsOf(providerID int64) []*ConnEntry {
	var out []*ConnEntry
	for _, c := range r.conns {
		if c.ProviderID == providerID {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority < out[j].Priority
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Turn returns the provider's request number and counts one more (the round-robin cursor the
// priority order rotates by; other strategies rotate by it too).
func (p *ProviderEntry) Turn() uint64 { return p.rr.Add(1) - 1 }

// Candidates returns the provider's usable connections in the order to try them: lower priority
// values first; within one priority, rotated round-robin so load spreads across equals.
func (p *ProviderEntry) Candidates() []*ConnEntry {
	n := len(p.Conns)
	if n <= 1 {
		return p.Conns
	}
	out := make([]*ConnEntry, 0, n)
	turn := p.rr.Add(1) - 1
	for i := 0; i < n; {
		j := i
		for j < n && p.Conns[j].Priority == p.Conns[i].Priority {
			j++
		}
		group := p.Conns[i:j]
		off := int(turn % uint64(len(group)))
		out = append(out, group[off:]...)
		out = append(out, group[:off]...)
		i = j
	}
	return out
}

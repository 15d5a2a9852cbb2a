// Package proxy is the engine of the gateway: it resolves a model address to a provider and its
// connections, forwards the request, fails over between connections, and relays answers and
// streams back event by event. It reads only in-memory state on the request path.
package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/health"
	"switchyard/services/proxy/tokencount"
	"switchyard/services/resilience"
	"switchyard/services/settings"
	"switchyard/services/spend"
)

// SettingsSource gives the engine the current settings snapshot.
type SettingsSource interface {
	Snapshot() *settings.Snapshot
}

// Registry gives the engine the current routing table.
type Registry interface {
	Registry() *catalog.Registry
}

// Options configures an Engine.
type Options struct {
	Catalog   Registry
	Inventory *Inventory
	// Client makes model discovery and connection tests; proxied calls go to its transport
	// directly (no redirect is followed either way, and the engine times its calls itself).
	Client     *http.Client
	Log        *slog.Logger
	Settings   SettingsSource
	Cooldowns  *resilience.Cooldowns
	Breakers   *resilience.Breakers
	Gate       *resilience.ProviderGate
	Health     *health.Tracker
	Lockouts   *resilience.Lockouts
	Queues     *resilience.Queues
	Semaphores *resilience.Semaphores
	Clock      clockwork.Clock
	Observer   Observer // nil = none
	// Price is the price of a provider's upstream model (provider name, provider type, model
	// id); nil or not ok: the request is left unpriced.
	Price func(provider, providerType, model string) (spend.Price, bool)
	// Accounts serves the bearer tokens of Claude subscription (OAuth) connections, their usage
	// polls and limit resets; nil leaves OAuth connections without a credential.
	Accounts Accounts
	// Copilot serves GitHub Copilot accounts their short-lived Copilot tokens (services/oauth).
	Copilot CopilotTokens
	// Lanes and Usage are the usage-wall tables of Claude accounts; nil turns the low-priority
	// lane and the skipping of accounts at their wall off.
	Lanes *resilience.Lanes
	Usage *resilience.Usage
	// OAuthSettings gives the Claude client settings (version, betas, usage threshold).
	OAuthSettings OAuthSettingsSource
	// MaxResponseBytes bounds a buffered (non-streaming) upstream answer. Default 64 MiB.
	MaxResponseBytes int64
	// Combos are the combos a client may name as its model; nil = none.
	Combos ComboSource
	// TargetCooldowns are the rests combos put targets on (combo_routing: cool); nil = none.
	TargetCooldowns *resilience.TargetCooldowns
	// Leases is the table of exclusive session leases; nil: no leases, every connection is free.
	Leases LeaseTable
	// SessionKey keys the session ids a Claude account sees in place of a client session bound
	// to another account (oauth_session.go). Default: a random key, so the derived ids stay the
	// same only while the process runs.
	SessionKey []byte
	// SessionBinds binds Claude Code sessions to the account that first served them
	// (oauth_session.go). Default: a table of the engine's own, kept only while it runs.
	SessionBinds *resilience.SessionBinds
	// Pins are the session affinity pins (affinity.go); nil turns session affinity off.
	Pins *resilience.Pins
	// StoredPins say which connection holds a stored Responses answer (stored.go); nil = none
	// are kept (a request that names another organisation's state still fails over).
	StoredPins *resilience.StoredPins
	// Replays remember the replayed reasoning a connection refused (replay.go); nil = nothing
	// is remembered (each request is refused once and made again without it).
	Replays *resilience.ReplayMemory
	// AnswerItems keep the output items of translated Responses answers for the client's later
	// item_reference (items.go); nil = none are kept, and a translated request that names an
	// item is refused.
	AnswerItems *resilience.AnswerItems
}

// Engine forwards client requests to upstream connections.
type Engine struct {
	opt Options
	// breakerCfg caches the compiled global breaker config of one settings snapshot.
	breakerCfg atomic.Pointer[cachedBreakerConfig]
	// sessionKey keys the ids other accounts see of a Claude Code session (oauth_session.go).
	sessionKey []byte
	// tokens counts count_tokens requests toward providers without that endpoint; its
	// vocabularies load on the first such request.
	tokens *tokencount.Counter
	// stats are the routing numbers of combo targets; turns count each combo's requests for
	// round-robin.
	stats *routeStats
	turns comboTurns
	// rt is opt.Client's transport: a proxied call skips http.Client, whose redirect loop it
	// never uses and whose per-call header copy it does not need (its headers are its own).
	rt http.RoundTripper
	// urls holds the parsed upstream address of each base URL and path the engine has called.
	urls urlCache
}

type cachedBreakerConfig struct {
	snap *settings.Snapshot
	cfg  resilience.BreakerConfig
}

// New builds an engine.
func New(opt Options) *Engine {
	if opt.MaxResponseBytes == 0 {
		opt.MaxResponseBytes = 64 << 20
	}
	if opt.Observer == nil {
		opt.Observer = nopObserver{}
	}
	if opt.Clock == nil {
		opt.Clock = clockwork.NewRealClock()
	}
	opt.Client = noRedirects(opt.Client)
	key := opt.SessionKey
	if len(key) == 0 {
		key = newSessionKey()
	}
	if opt.SessionBinds == nil {
		opt.SessionBinds = resilience.NewSessionBinds(opt.Clock, resilience.SessionBindTTL, resilience.MaxSessionBinds, nil)
	}
	rt := opt.Client.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &Engine{opt: opt, sessionKey: key, tokens: tokencount.New(), stats: newRouteStats(), rt: rt}
}

// NewTransport returns the HTTP transport tuned for many concurrent upstream calls and streams.
// It sets no response header timeout: a proxied call's wait for its headers is bounded by its
// attempt (streams.first_byte_timeout_ms, up to an hour, which a fixed transport timeout would
// cut short, on a timer of its own on every call); calls made through NewClient are bounded by
// the client's timeout.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialWithConnectTimeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Compressed SSE would be buffered by the decompressor; ask upstreams for identity.
		DisableCompression: true,
	}
}

// connectTimeoutKey carries a call's connect timeout (streams.connect_timeout_ms) in its request's
// context to the transport's dialer, which sees the request's values.
type connectTimeoutKey struct{}

// defaultConnectTimeout bounds a dial whose request names no connect timeout (model discovery,
// OAuth calls).
const defaultConnectTimeout = 30 * time.Second

func withConnectTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, connectTimeoutKey{}, d)
}

// dialWithConnectTimeout dials with the connect timeout of the request that asked for the
// connection.
func dialWithConnectTimeout(ctx context.Context, network, addr string) (net.Conn, error) {
	d := defaultConnectTimeout
	if v, ok := ctx.Value(connectTimeoutKey{}).(time.Duration); ok && v > 0 {
		d = v
	}
	return (&net.Dialer{Timeout: d, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
}

// streamReadBuffer is the read buffer of an upstream stream, held for as long as the stream is
// open: 1 KiB holds a typical event whole (a content delta is 150–400 bytes); a longer one is
// read in pieces into the relay's event buffer (readEventInto, bufio.ErrBufferFull). The
// transport buffers below it (its own 4 KiB per HTTP/1.1 connection, HTTP/2's flow-control
// window), so a smaller buffer here costs no system calls.
const streamReadBuffer = 1 << 10

// NewClient returns the HTTP client for calls to upstreams: NewTransport, and redirects are
// never followed. A call through the client (a sign-in, a usage poll, a model list, a
// connection test) ends after clientTimeout; the engine's proxied calls use its transport
// directly, bounded by their attempts' limits.
func NewClient() *http.Client {
	return &http.Client{Transport: NewTransport(), CheckRedirect: refuseRedirect, Timeout: clientTimeout}
}

// clientTimeout bounds a whole call made through NewClient's client.
const clientTimeout = 10 * time.Minute

// refuseRedirect makes a client hand back a 3xx answer instead of following it. Following one
// would send the call again, to wherever the upstream points (an internal address included),
// with its body (a prompt, an OAuth code and verifier, a refresh token) and with the credential
// headers Go does not drop on the way (x-api-key). The caller treats the 3xx as the upstream's
// failure it is.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// noRedirects returns a copy of c that refuses redirects, whoever built c (nil: NewClient).
func noRedirects(c *http.Client) *http.Client {
	if c == nil {
		return NewClient()
	}
	out := *c
	out.CheckRedirect = refuseRedirect
	return &out
}

// isRedirect reports whether an upstream's status is a redirect, which is never followed.
func isRedirect(status int) bool { return status >= 300 && status < 400 }

// target is a resolved model address.
type target struct {
	provider *catalog.ProviderEntry
	model    string // the upstream's own model id
}

// MaxModelName bounds the model a client may name, in bytes. Unlisted models are forwarded, so
// a name the client made up becomes a key of the lockout, breaker and health tables (and a row
// of the lockout table on disk): those tables are bounded in entries, this bounds each entry.
// Real ids, an inference profile's ARN included, are far shorter.
const MaxModelName = 256

// resolve maps a client model string to a provider and upstream model: "provider/model" (any
// model of a known provider, see checkListed), or a bare model that exactly one provider's
// inventory lists.
func (e *Engine) resolve(ctx context.Context, model string) (target, *errs.Error) {
	if len(model) > MaxModelName {
		return target{}, errInvalid("invalid_request", "proxy.model_too_long", MaxModelName)
	}
	reg := e.opt.Catalog.Registry()
	if prov, name, ok := SplitModel(model, func(n string) bool { _, ok := reg.Provider(n); return ok }); ok {
		p, _ := reg.Provider(prov)
		if name == "" {
			return target{}, errModelNotFound(model)
		}
		return e.checkListed(ctx, p, name, model)
	}
	switch served := e.opt.Inventory.ServedBy(model); len(served) {
	case 0:
		return target{}, errModelNotFound(model)
	case 1:
		p, _ := reg.Provider(served[0])
		if p == nil {
			return target{}, errModelNotFound(model)
		}
		return target{provider: p, model: model}, nil
	default:
		return target{}, errInvalid("ambiguous_model", "proxy.ambiguous_model", model, strings.Join(served, ", "))
	}
}

// Model finds one model as a client names it, the way routing resolves the name
// (provider/model, or a bare name exactly one provider serves), among the models /v1/models
// lists; the answer carries the id the client used. A name routing refuses (unknown, ambiguous)
// answers with routing's error, a model the list does not show as not found (after one
// on-demand refresh of its provider's list), even where requests naming it are forwarded:
// this endpoint describes the models the gateway knows, and a client asking about one
// (OpenAI's SDKs' models.retrieve; Codex reads the list instead) is told the truth.
func (e *Engine) Model(ctx context.Context, id string) (Model, *errs.Error) {
	t, err := e.resolve(ctx, id)
	if err != nil {
		return Model{}, err
	}
	find := func() (Model, bool) {
		for _, m := range e.opt.Inventory.List() {
			if m.Provider == t.provider.Name && m.Name == t.model {
				m.ID = id
				return m, true
			}
		}
		return Model{}, false
	}
	if m, ok := find(); ok {
		return m, nil
	}
	if found, _ := e.opt.Inventory.Lookup(t.provider.Name, t.model); !found {
		e.opt.Inventory.RefreshIfStale(ctx, t.provider, listedRefreshGap)
		if m, ok := find(); ok {
			return m, nil
		}
	}
	return Model{}, errModelNotFound(id)
}

// SplitModel reads a "provider/model" address: the part before the first slash names a provider
// when isProvider says so; the rest (which may contain slashes, as in "openrouter/meta/llama") is
// the upstream's model id. ok is false for a bare model name.
func SplitModel(model string, isProvider func(string) bool) (provider, name string, ok bool) {
	prov, name, found := strings.Cut(model, "/")
	if !found || !isProvider(prov) {
		return "", model, false
	}
	return prov, name, true
}

// listedRefreshGap is how often a model the inventory does not list may make its provider's
// list be fetched again on demand.
const listedRefreshGap = 30 * time.Second

// checkListed decides whether a provider/model the provider's inventory does not list is sent.
// By default it is: the upstream decides (a model released since the last discovery refresh
// works at once; one it does not serve answers 404, which the model lockout then remembers).
// A provider with ListedModelsOnly refuses it instead, after one on-demand refresh of its list
// (at most every listedRefreshGap), without calling the upstream. While the provider's
// inventory is unknown (discovery never succeeded) the request is sent either way.
func (e *Engine) checkListed(ctx context.Context, p *catalog.ProviderEntry, name, full string) (target, *errs.Error) {
	t := target{provider: p, model: name}
	if !p.ListedModelsOnly {
		return t, nil
	}
	found, listed := e.opt.Inventory.Lookup(p.Name, name)
	if found || !listed {
		return t, nil
	}
	e.opt.Inventory.RefreshIfStale(ctx, p, listedRefreshGap)
	if found, listed = e.opt.Inventory.Lookup(p.Name, name); found || !listed {
		return t, nil
	}
	return target{}, errModelNotFound(full)
}

// ValidIdempotencyKey accepts 1–255 visible ASCII characters; anything else is not forwarded.
func ValidIdempotencyKey(k string) bool {
	if k == "" || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func isEventStream(h http.Header) bool {
	return strings.HasPrefix(strings.ToLower(h.Get("Content-Type")), "text/event-stream")
}

// upstreamError turns an upstream error answer into the client's error: the upstream's status
// and its own message text when its body carries one, else a short excerpt of the body.
func upstreamError(provider string, status int, h http.Header, body []byte) *errs.Error {
	e := &errs.Error{Code: errs.CodeForStatus(status), Status: status, Reason: "upstream_error"}
	if msg, _, _, _, ok := resilience.ExtractError(body); ok && msg != "" {
		e.Msg = errs.M("proxy.upstream_message", provider, status, snippet([]byte(msg)))
	} else {
		e.Msg = errs.M("proxy.upstream_status", provider, status, strings.TrimSpace(snippet(body)))
	}
	if ra := h.Get("Retry-After"); ra != "" {
		if d, err := time.ParseDuration(strings.TrimSpace(ra) + "s"); err == nil && d > 0 {
			e.RetryAfter = d
		}
	}
	return e
}

// transportText says in a message why an upstream could not be reached.
func transportText(err error) errs.Msg {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return errs.M("proxy.transport_timeout")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errs.M("proxy.transport_eof")
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return errs.M("proxy.transport_op", oe.Op, oe.Err.Error())
	}
	return errs.M("proxy.transport_failed")
}

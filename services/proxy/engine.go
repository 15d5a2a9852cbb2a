// Package proxy is the engine of the gateway: it resolves a model address to a provider and its
// connections, forwards the request, fails over between connections, and relays answers and
// streams back event by event. It reads only in-memory state on the request path.
package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"switchyard/services/catalog"
)

// Registry gives the engine the current routing table.
type Registry interface {
	Registry() *catalog.Registry
}

// Options configures an Engine.
type Options struct {
	Catalog   Registry
	Inventory *Inventory
	Client    *http.Client
	Log       *slog.Logger
	Now       func() time.Time
	// MaxResponseBytes bounds a buffered (non-streaming) upstream answer. Default 64 MiB.
	MaxResponseBytes int64
}

// Engine forwards client requests to upstream connections.
type Engine struct {
	opt Options
}

// New builds an engine.
func New(opt Options) *Engine {
	if opt.MaxResponseBytes == 0 {
		opt.MaxResponseBytes = 64 << 20
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Engine{opt: opt}
}

// NewTransport returns the HTTP transport tuned for many concurrent upstream calls and streams.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: 10 * time.Minute,
		// Compressed SSE would be buffered by the decompressor; ask upstreams for identity.
		DisableCompression: true,
	}
}

// target is a resolved model address.
type target struct {
	provider *catalog.ProviderEntry
	model    string // the upstream's own model id
}

// resolve maps a client model string to a provider and upstream model: "provider/model", or a
// bare model that exactly one provider's inventory lists.
func (e *Engine) resolve(ctx context.Context, model string) (target, *Error) {
	reg := e.opt.Catalog.Registry()
	if prov, name, ok := strings.Cut(model, "/"); ok {
		if p, found := reg.Provider(prov); found {
			if name == "" {
				return target{}, errModelNotFound(model)
			}
			return e.checkListed(ctx, p, name, model)
		}
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
		return target{}, &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "ambiguous_model",
			Message: fmt.Sprintf("The model `%s` is served by several providers (%s); address it as provider/model.",
				model, strings.Join(served, ", "))}
	}
}

// checkListed refuses a model the provider's inventory does not list, after one on-demand
// refresh. When the provider's inventory is unknown (discovery failed), the request is sent.
func (e *Engine) checkListed(ctx context.Context, p *catalog.ProviderEntry, name, full string) (target, *Error) {
	t := target{provider: p, model: name}
	found, listed := e.opt.Inventory.Lookup(p.Name, name)
	if found || !listed {
		return t, nil
	}
	e.opt.Inventory.RefreshIfStale(ctx, p, 30*time.Second)
	if found, listed = e.opt.Inventory.Lookup(p.Name, name); found || !listed {
		return t, nil
	}
	return target{}, errModelNotFound(full)
}

// forwardedHeaders are the client headers passed upstream; credentials, session and hop-by-hop
// headers never are.
var forwardedHeaders = []string{"Accept", "User-Agent", "OpenAI-Beta"}

// Chat forwards a chat completions request and writes the answer to w. It returns an *Error only
// when nothing has been written yet; the caller renders it in the client's format.
func (e *Engine) Chat(ctx context.Context, w http.ResponseWriter, req ChatRequest, in http.Header) *Error {
	t, perr := e.resolve(ctx, req.Model)
	if perr != nil {
		return perr
	}
	if isAnthropic(t.provider.Type) {
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_provider_type",
			Message: fmt.Sprintf("provider %s is of type %s; /v1/chat/completions reaches openai and openai-compatible providers",
				t.provider.Name, t.provider.Type)}
	}
	body, err := withModel(req.Body, t.model)
	if err != nil {
		return errInvalid("invalid_json", "request body cannot be rewritten: "+err.Error())
	}
	cands := t.provider.Candidates()
	if len(cands) == 0 {
		return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "no_connections",
			RetryAfter: 30 * time.Second,
			Message: fmt.Sprintf("provider %s has no usable connection; add one in the Switchyard dashboard", t.provider.Name)}
	}
	header := upstreamHeader(in)
	var last *Error
	for _, c := range cands {
		res := e.attempt(ctx, t, c, body, header, req.Stream)
		if res.err == nil {
			return e.deliver(ctx, w, t, c, res)
		}
		if ctx.Err() != nil {
			return clientGone()
		}
		last = res.err
		if !res.failover {
			break
		}
		e.opt.Log.Info("failing over", "provider", t.provider.Name, "connection_id", c.ID, "status", res.status,
			"reason", res.err.Code)
	}
	return last
}

// attemptResult is one upstream call: either a response ready to relay, or a failure.
type attemptResult struct {
	resp     *http.Response // open body on success
	first    []byte         // for streams: the first complete event, already read
	body     []byte         // for buffered answers: the whole body
	status   int
	err      *Error
	failover bool // the failure is the connection's or the upstream's; another connection may serve
}

func (e *Engine) attempt(ctx context.Context, t target, c *catalog.ConnEntry, body []byte, header http.Header, stream bool) attemptResult {
	url := t.provider.BaseURL + "/chat/completions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return attemptResult{err: &Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "internal",
			Message: "cannot build upstream request"}}
	}
	req.Header = header.Clone()
	setAuth(req.Header, t.provider, c)
	resp, err := e.opt.Client.Do(req)
	if err != nil {
		return attemptResult{failover: true, err: &Error{Status: http.StatusBadGateway, Type: "upstream_error",
			Code: "upstream_unreachable", Message: fmt.Sprintf("provider %s could not be reached: %s", t.provider.Name, transportText(err))}}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		return attemptResult{status: resp.StatusCode, failover: resp.StatusCode == 429 || resp.StatusCode >= 500,
			err: upstreamError(t.provider.Name, resp.StatusCode, resp.Header, b)}
	}
	if stream && isEventStream(resp.Header) {
		return attemptResult{resp: resp, status: resp.StatusCode}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, e.opt.MaxResponseBytes+1))
	resp.Body.Close()
	if err != nil {
		return attemptResult{failover: true, err: &Error{Status: http.StatusBadGateway, Type: "upstream_error",
			Code: "upstream_read_failed", Message: fmt.Sprintf("reading the answer of provider %s failed: %s", t.provider.Name, transportText(err))}}
	}
	if int64(len(b)) > e.opt.MaxResponseBytes {
		return attemptResult{err: &Error{Status: http.StatusBadGateway, Type: "upstream_error", Code: "upstream_response_too_large",
			Message: "the upstream answer exceeds the size limit"}}
	}
	return attemptResult{resp: resp, body: b, status: resp.StatusCode}
}

// deliver writes a successful attempt to the client.
func (e *Engine) deliver(ctx context.Context, w http.ResponseWriter, t target, c *catalog.ConnEntry, res attemptResult) *Error {
	h := w.Header()
	h.Set("X-Switchyard-Provider", t.provider.Name)
	if res.body != nil {
		if ct := res.resp.Header.Get("Content-Type"); ct != "" {
			h.Set("Content-Type", ct)
		} else {
			h.Set("Content-Type", "application/json")
		}
		w.WriteHeader(res.status)
		_, _ = w.Write(res.body)
		return nil
	}
	defer res.resp.Body.Close()
	relayStream(ctx, w, res.resp.Body, e.opt.Log)
	return nil
}

func upstreamHeader(in http.Header) http.Header {
	h := make(http.Header, 6)
	h.Set("Content-Type", "application/json")
	for _, k := range forwardedHeaders {
		if v := in.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	if k := in.Get("Idempotency-Key"); ValidIdempotencyKey(k) {
		h.Set("Idempotency-Key", k)
	}
	return h
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

// upstreamError turns an upstream error answer into the client's error; an OpenAI-format body is
// relayed as is, anything else is wrapped.
func upstreamError(provider string, status int, h http.Header, body []byte) *Error {
	e := &Error{Status: status, Type: "upstream_error", Code: "upstream_error",
		Message: fmt.Sprintf("provider %s answered HTTP %d: %s", provider, status, strings.TrimSpace(snippet(body)))}
	if looksLikeOpenAIError(body) {
		e.Raw = body
	}
	if ra := h.Get("Retry-After"); ra != "" {
		if d, err := time.ParseDuration(strings.TrimSpace(ra) + "s"); err == nil && d > 0 {
			e.RetryAfter = d
		}
	}
	return e
}

func looksLikeOpenAIError(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && bytes.Contains(b[:min(len(b), 64)], []byte(`"error"`))
}

func transportText(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed before the answer was complete"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op + ": " + oe.Err.Error()
	}
	return "connection failed"
}

func clientGone() *Error {
	return &Error{Status: 499, Type: "client_closed", Code: "client_closed", Message: "client closed the request"}
}

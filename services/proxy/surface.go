package proxy

import (
	"context"
	"net/http"
	"strings"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/proxy/translate"
	"switchyard/services/settings"
)

// Format is a wire format: what a client speaks, or what an upstream answers in.
type Format int

// The wire formats.
const (
	FormatChat     Format = iota // OpenAI chat completions
	FormatMessages               // Anthropic messages
)

// wireOf is the format a provider's upstream speaks.
func wireOf(providerType string) Format {
	if isAnthropic(providerType) {
		return FormatMessages
	}
	return FormatChat
}

// anthropicVersion is sent to Anthropic upstreams when the client named none.
const anthropicVersion = "2023-06-01"

// Chat forwards a chat completions request (the raw client body) and writes the answer to w, in
// the OpenAI format, whatever the provider speaks.
func (e *Engine) Chat(ctx context.Context, w http.ResponseWriter, raw []byte, in http.Header, tr *Trace) *errs.Error {
	return e.serve(ctx, w, raw, in, tr, FormatChat, false)
}

// Messages forwards an Anthropic messages request and writes the answer in the Anthropic
// format, whatever the provider speaks.
func (e *Engine) Messages(ctx context.Context, w http.ResponseWriter, raw []byte, in http.Header, tr *Trace) *errs.Error {
	return e.serve(ctx, w, raw, in, tr, FormatMessages, false)
}

// CountTokens forwards POST /v1/messages/count_tokens to an Anthropic provider.
func (e *Engine) CountTokens(ctx context.Context, w http.ResponseWriter, raw []byte, in http.Header, tr *Trace) *errs.Error {
	return e.serve(ctx, w, raw, in, tr, FormatMessages, true)
}

// serve is every surface's way through the engine. It returns an error only when nothing has
// been written yet; the caller renders it in the client's format. The body is parsed and its
// model resolved once, here: the model is read first so a full request queue turns the request
// away before any other work, then the body is validated and, when the provider speaks another
// format, translated.
//
// Order of work: the provider's eligible connections are tried in order (priority, then round
// robin); a failure that is the connection's (classified) cools it and moves the same request to
// the next eligible connection at once. When no untried eligible connection is left and the
// failure is retryable, the engine waits (exponential backoff with jitter, or until the earliest
// cooldown ends if that is sooner than max_backoff) and starts another round, up to max_retries.
// Nothing is retried once a byte of the answer reached the client.
func (e *Engine) serve(ctx context.Context, w http.ResponseWriter, raw []byte, in http.Header, tr *Trace, src Format, countTokens bool) *errs.Error {
	if tr == nil {
		tr = &Trace{}
	}
	var t target
	var rerr *errs.Error
	if m := peekModel(raw); m != "" {
		if t, rerr = e.resolve(ctx, m); rerr == nil {
			if qerr := e.admitQueue(t); qerr != nil {
				tr.ErrorCode = qerr.ReasonCode()
				return qerr
			}
		}
	}
	req, derr := DecodeRequest(raw)
	if derr != nil {
		return derr
	}
	if rerr != nil {
		return rerr
	}
	if countTokens {
		req.Stream = false
	}
	tr.Stream = req.Stream
	tr.Provider, tr.Model, tr.MetricModel = t.provider.Name, t.model, t.model
	if found, _ := e.opt.Inventory.Lookup(t.provider.Name, t.model); !found {
		tr.MetricModel = UnlistedModel // clients choose model names: keep metric labels bounded
	}
	c, perr := e.prepare(t, req, in, tr, src, countTokens)
	if perr != nil {
		tr.ErrorCode = perr.ReasonCode()
		return perr
	}
	perr = e.run(ctx, w, c)
	if perr != nil {
		tr.ErrorCode = perr.ReasonCode()
	}
	if perr != nil && c.committed {
		if !isClientGone(perr) {
			writeStreamError(w, c.src, perr)
		}
		return nil
	}
	return perr
}

// prepare builds the call: the upstream's format, address, headers and body (translated when
// the formats differ), and the call's retry policy.
func (e *Engine) prepare(t target, req Request, in http.Header, tr *Trace, src Format, countTokens bool) (*call, *errs.Error) {
	c := &call{trace: tr, start: e.opt.Clock.Now(), t: t, stream: req.Stream, snap: e.opt.Settings.Snapshot(),
		src: src, dst: wireOf(t.provider.Type), countTokens: countTokens}
	switch {
	case countTokens && c.dst != FormatMessages:
		return nil, errInvalid("unsupported_operation", "proxy.count_tokens_unsupported", t.provider.Name, t.provider.Type)
	case countTokens:
		c.path = "/v1/messages/count_tokens"
	case c.dst == FormatMessages:
		c.path = "/v1/messages"
	default:
		c.path = "/chat/completions"
	}
	body := req.Body
	if c.src != c.dst {
		target := translate.Target{MaxCompletionTokens: t.provider.Type == catalog.TypeOpenAI}
		var tx translate.Request
		var err error
		if c.src == FormatChat {
			tx, err = translate.ChatToMessages(body, target)
			c.includeUsage = includeUsage(body)
		} else {
			tx, err = translate.MessagesToChat(body, target)
		}
		if err != nil {
			return nil, errInvalid("invalid_request", "proxy.body_translate", err.Error())
		}
		if len(tx.Dropped) > 0 {
			e.opt.Log.Debug("fields the provider's format cannot carry were dropped", "provider", t.provider.Name,
				"fields", strings.Join(tx.Dropped, ","))
		}
		body = tx.Body
	}
	var err error
	if c.body, err = withModel(body, t.model); err != nil {
		return nil, errInvalid("invalid_json", "proxy.body_rewrite", err.Error())
	}
	c.header = upstreamHeader(in, c.src, c.dst)
	c.claude = claudeCall{raw: req.Raw, client: in}
	c.retry, c.retryOn = c.snap.Resilience().Retry, c.snap.RetryOn()
	if t.provider.Resilience.Retry != (settings.RetryOverrides{}) { // rare: compute the provider's own
		c.retry, _ = c.snap.RetryFor(t.provider.Resilience)
		if t.provider.Resilience.Retry.RetryOnStatuses != nil {
			if m, err := settings.NewStatusMatcher(c.retry.RetryOnStatuses); err == nil {
				c.retryOn = m
			}
		}
	}
	return c, nil
}

// upstreamHeader is what the upstream gets of the client's headers: content negotiation, the
// user agent, the format's own version and beta headers when client and upstream speak the same
// format, and a valid Idempotency-Key. Credentials, session and hop-by-hop headers never pass.
func upstreamHeader(in http.Header, src, dst Format) http.Header {
	h := make(http.Header, 8)
	h.Set("Content-Type", "application/json")
	for _, k := range []string{"Accept", "User-Agent"} {
		if v := in.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	if src == dst {
		names := []string{"OpenAI-Beta"}
		if dst == FormatMessages {
			names = []string{"anthropic-version", "anthropic-beta"}
		}
		for _, k := range names {
			if v := in.Values(k); len(v) > 0 {
				h[http.CanonicalHeaderKey(k)] = v
			}
		}
	}
	if dst == FormatMessages && h.Get("anthropic-version") == "" {
		h.Set("anthropic-version", anthropicVersion)
	}
	if k := in.Get("Idempotency-Key"); ValidIdempotencyKey(k) {
		h.Set("Idempotency-Key", k)
	}
	return h
}

// streamRelay turns the upstream's stream events into the client's, one at a time.
type streamRelay interface {
	// Event appends the client's bytes for one upstream event to dst.
	Event(dst, ev []byte) []byte
	// Done reports whether the upstream's terminal event was seen.
	Done() bool
	// Usage is the token count seen so far.
	Usage() (in, out int64)
}

// relay picks the stream relay of a call: the events as they are when client and upstream speak
// the same format, else a translator.
func (c *call) relay() streamRelay {
	switch {
	case c.src == c.dst && c.dst == FormatChat:
		return &passthrough{terminal: hasDone}
	case c.src == c.dst:
		return &passthrough{terminal: isMessageStop}
	case c.src == FormatChat:
		return &translate.MessagesToChatStream{IncludeUsage: c.includeUsage, Created: c.start.Unix()}
	}
	return translate.NewChatToMessagesStream()
}

// translateBody turns a buffered upstream answer into the client's format.
func (c *call) translateBody(b []byte) ([]byte, error) {
	switch {
	case c.src == c.dst:
		return b, nil
	case c.src == FormatChat:
		return translate.MessagesResponseToChat(b, c.start.Unix())
	}
	return translate.ChatResponseToMessages(b)
}

// passthrough relays events as they came, ending each with its blank line.
type passthrough struct {
	terminal func(ev []byte) bool
	done     bool
	in, out  int64
}

func (p *passthrough) Event(dst, ev []byte) []byte {
	if p.terminal(ev) {
		p.done = true
	}
	if in, out, inOK, outOK := usageOf(ev); inOK || outOK {
		if inOK {
			p.in = in
		}
		if outOK {
			p.out = out
		}
	}
	return append(dst, terminate(ev)...)
}

func (p *passthrough) Done() bool             { return p.done }
func (p *passthrough) Usage() (in, out int64) { return p.in, p.out }

// isMessageStop reports whether an Anthropic event is the stream's last.
func isMessageStop(ev []byte) bool {
	name, data := translate.ParseEvent(ev)
	return name == "message_stop" || (name == "" && strings.Contains(string(data), `"type":"message_stop"`))
}

// includeUsage reads a chat request's stream_options.include_usage.
func includeUsage(body []byte) bool {
	return gjsonBool(body, "stream_options.include_usage")
}

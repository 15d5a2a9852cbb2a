package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/responses"
	"switchyard/services/proxy/tokencount"
	"switchyard/services/resilience"
	"switchyard/services/routing"
	"switchyard/services/settings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Format is a wire format: what a client speaks, or what an upstream answers in.
type Format int

// The wire formats.
const (
	FormatChat      Format = iota // OpenAI chat completions
	FormatMessages                // Anthropic messages
	FormatResponses               // OpenAI Responses
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

// Responses forwards an OpenAI Responses request: natively to providers that serve the
// Responses API (openai, and openai-compatible ones that say so), translated through chat
// completions to every other.
func (e *Engine) Responses(ctx context.Context, w http.ResponseWriter, raw []byte, in http.Header, tr *Trace) *errs.Error {
	return e.serve(ctx, w, raw, in, tr, FormatResponses, false)
}

// nativeResponses reports whether a provider serves the Responses API itself.
func nativeResponses(p *catalog.ProviderEntry) bool {
	return p.Type == catalog.TypeOpenAI || (p.Type == catalog.TypeOpenAICompatible && p.ResponsesAPI)
}

// CountTokens answers POST /v1/messages/count_tokens: forwarded to an anthropic or
// anthropic-compatible provider, counted locally for every other (see countLocally).
func (e *Engine) CountTokens(ctx context.Context, w http.ResponseWriter, raw []byte, in http.Header, tr *Trace) *errs.Error {
	return e.serve(ctx, w, raw, in, tr, FormatMessages, true)
}

// TokenCountHeader marks a count_tokens answer the gateway estimated itself ("estimate"), and
// TokenizerHeader names the encoding it counted with.
const (
	TokenCountHeader = "X-Switchyard-Token-Count"
	TokenizerHeader  = "X-Switchyard-Tokenizer"
)

// countsLocally reports whether a count_tokens request toward t is answered by the gateway:
// only Anthropic's wire format has the endpoint.
func countsLocally(t target, countTokens bool) bool {
	return countTokens && t.provider != nil && !isAnthropic(t.provider.Type)
}

// countLocally answers a count_tokens request toward a provider without that endpoint with the
// gateway's own count, in Anthropic's shape ({"input_tokens": N}) and marked as an estimate. It
// makes no upstream call, so it takes no queue slot and no connection.
func (e *Engine) countLocally(ctx context.Context, w http.ResponseWriter, t target, req Request, tr *Trace) *errs.Error {
	n, enc, err := e.tokens.Messages(ctx, req.Body, t.model)
	switch {
	case errors.Is(err, tokencount.ErrNoMessages):
		return errInvalid("invalid_request", "proxy.count_tokens_messages")
	case ctx.Err() != nil:
		return clientGone()
	case err != nil:
		return &errs.Error{Code: errs.Internal, Msg: errs.M("err.internal"), Err: fmt.Errorf("count tokens: %w", err)}
	}
	body := strconv.AppendInt([]byte(`{"input_tokens":`), int64(n), 10)
	body = append(body, '}')
	h := w.Header()
	h.Set("X-Switchyard-Provider", t.provider.Name)
	h.Set(TokenCountHeader, "estimate")
	h.Set(TokenizerHeader, string(enc))
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	tr.Status = http.StatusOK
	return nil
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
	c, x, perr := e.begin(ctx, w, raw, in, tr, src, countTokens)
	if x != nil {
		return e.serveCombo(ctx, w, raw, in, tr, src, countTokens, x)
	}
	if c == nil {
		return perr
	}
	perr = e.run(ctx, w, c)
	if perr != nil {
		tr.ErrorCode = perr.ReasonCode()
		finalError(perr, tr.Attempts)
	}
	if perr != nil && c.out.committed {
		if !isClientGone(perr) {
			writeStreamError(w, c.src, perr)
		}
		return nil
	}
	return perr
}

// begin is serve up to the call: the model checked and resolved, the queue admitted, the body
// decoded and the call prepared. It returns the call, or the combo the model names, or neither
// (the request was refused with the error, or answered here: a count_tokens request counted
// locally). It is not inlined into serve, whose frame stays on the stack for as long as a stream
// is open: the stack a goroutine grew to is what every open stream keeps.
//
//go:noinline
func (e *Engine) begin(ctx context.Context, w http.ResponseWriter, raw []byte, in http.Header, tr *Trace, src Format,
	countTokens bool) (*call, *routing.Expansion, *errs.Error) {
	var t target
	var rerr *errs.Error
	var lease *routing.Lease
	// Until the model resolves, the trace holds it as the client wrote it: a request refused
	// before (a model outside the key's allowed_models, an unknown or ambiguous model, a lease
	// that does not hold, a bad field, a full queue) is logged with what it asked for, its stream
	// flag too. The key's allow-list is checked first, on the name as written, so a refused key
	// learns nothing about which models exist and nothing is fetched or sent for it.
	// The body is decoded first: when it is valid, its model is the one peekModel would read
	// (a trimmed top-level string), without a second pass over the body. An invalid body is
	// refused after the checks below, as before, so it is logged with the model it names.
	req, derr := DecodeRequest(raw)
	m := req.Model
	if derr != nil {
		m = peekModel(raw)
	}
	if m != "" {
		tr.Model = m
		if !e.ModelAllowed(tr.Access, m) {
			aerr := errModelNotAllowed(m)
			tr.ErrorCode, tr.Stream = aerr.ReasonCode(), peekStream(raw, countTokens)
			return nil, nil, aerr
		}
		if x := e.combo(m); x != nil {
			return nil, x, nil
		}
		if t, rerr = e.resolve(ctx, m); rerr == nil {
			t, lease, rerr = e.leaseTarget(in, tr.ClientKeyID, t)
		}
		if rerr == nil && !countsLocally(t, countTokens) {
			if qerr := e.admitQueue(t); qerr != nil {
				tr.ErrorCode, tr.Stream = qerr.ReasonCode(), peekStream(raw, countTokens)
				return nil, nil, qerr
			}
		}
	}
	if derr != nil {
		tr.Stream = peekStream(raw, countTokens)
		return nil, nil, derr
	}
	if countTokens {
		req.Stream = false
	}
	tr.Stream = req.Stream
	if rerr != nil {
		return nil, nil, rerr
	}
	tr.Provider, tr.Model, tr.MetricModel = t.provider.Name, t.model, t.model
	if found, _ := e.opt.Inventory.Lookup(t.provider.Name, t.model); !found {
		tr.MetricModel = UnlistedModel // clients choose model names: keep metric labels bounded
	}
	if countsLocally(t, countTokens) {
		if cerr := e.countLocally(ctx, w, t, req, tr); cerr != nil {
			tr.ErrorCode = cerr.ReasonCode()
			return nil, nil, cerr
		}
		return nil, nil, nil
	}
	c, perr := e.prepare(t, req, in, tr, src, countTokens)
	if perr != nil {
		tr.ErrorCode = perr.ReasonCode()
		return nil, nil, perr
	}
	c.lease = lease
	return c, nil, nil
}

// prepare builds the call: the upstream's format, address, headers and body (translated when
// the formats differ), and the call's retry policy.
func (e *Engine) prepare(t target, req Request, in http.Header, tr *Trace, src Format, countTokens bool) (*call, *errs.Error) {
	c := &call{trace: tr, start: e.opt.Clock.Now(), t: t, stream: req.Stream, reasoning: req.Reasoning, snap: e.opt.Settings.Snapshot(),
		src: src, dst: upstreamFormat(t.provider, t.model, src), asked: req.Model, countTokens: countTokens, out: &clientOut{}}
	var turn keptTurn
	if src == FormatResponses && c.dst != FormatResponses {
		body, kt, field, ierr := e.expandStored(req.Body, tr.ClientKeyID)
		if ierr != nil {
			return nil, ierr
		}
		if field != "" {
			return nil, errInvalid("unsupported_parameter", "proxy.stored_state_unsupported", t.provider.Name, t.provider.Type, field)
		}
		req.Body, turn = body, kt
	}
	switch {
	case countTokens:
		c.path = "/v1/messages/count_tokens"
	case c.dst == FormatMessages:
		c.path = "/v1/messages"
	case c.dst == FormatResponses:
		c.path = "/responses"
	default:
		c.path = "/chat/completions"
	}
	if c.src != c.dst {
		var err error
		if c.body, err = e.translateRequest(c, req.Body); err != nil {
			return nil, errInvalid("invalid_request", "proxy.body_translate", err.Error())
		}
		if src == FormatResponses {
			c.req.PreviousResponseID = turn.prev // expanded: the answer echoes it
		}
		if e.keepsItems(c) {
			c.req.IDSuffix, c.keepItem = newIDSuffix(), e.newAnswerKeeper(c, turn).keep
		}
	} else {
		// A chat stream's usage is what the request is charged by: ask for it, and keep the chunk
		// that carries it from a client that did not ask. A body without stream_options gets them
		// in the copy that names the upstream's model.
		askUsage := c.dst == FormatChat && req.Stream && !countTokens &&
			gjson.Get(req.StreamOptions, "include_usage").Type != gjson.True
		var err error
		if c.body, err = forUpstream(req.Body, t.model, askUsage && req.StreamOptions == ""); err != nil {
			return nil, errInvalid("invalid_json", "proxy.body_rewrite", err.Error())
		}
		switch {
		case askUsage && req.StreamOptions == "":
			c.hideUsage = true
		case askUsage:
			if b, err := sjson.SetBytes(c.body, "stream_options.include_usage", true); err == nil {
				c.body, c.hideUsage = b, true
			}
		}
	}
	c.header = upstreamHeader(in, c.src, c.dst)
	c.claude = claudeCall{raw: req.Raw, client: in}
	c.session = e.sessionFor(in, req.Raw, src, tr.ClientKeyID)
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

// upstreamFormat is the format a request of format src is sent in to provider p for model: the
// provider's own (messages for Anthropic's types, chat completions for the others), Responses
// for the models an OpenAI-family provider serves only there (SendsResponses), and Responses for
// a Responses client of a provider that serves the Responses API itself.
func upstreamFormat(p *catalog.ProviderEntry, model string, src Format) Format {
	if isAnthropic(p.Type) {
		return FormatMessages
	}
	if p.SendsResponses(model) || src == FormatResponses && nativeResponses(p) {
		return FormatResponses
	}
	return FormatChat
}

// translateRequest turns the client's body into the upstream's format through the conversation
// model; the client's request stays on the call for the answer's writer. What the upstream's
// format cannot carry is dropped by name: logged with the request, counted in metrics.
func (e *Engine) translateRequest(c *call, body []byte) ([]byte, error) {
	r, err := codecs[c.src].readRequest(body)
	if err != nil {
		return nil, err
	}
	c.req = r
	up := *r // the upstream's copy names the upstream's model; the client's keeps what it asked
	up.Model = c.t.model
	target := convo.Target{MaxCompletionTokens: c.t.provider.Type == catalog.TypeOpenAI}
	out, err := codecs[c.dst].appendRequest(make([]byte, 0, len(body)+len(body)/8+64), &up, target)
	if err != nil {
		return nil, err
	}
	if len(up.Dropped) > 0 {
		c.trace.Dropped = up.Dropped
		for _, name := range up.Dropped {
			e.opt.Observer.Dropped(c.t.provider.Name, name)
		}
	}
	return out, nil
}

// upstreamHeader is what the upstream gets of the client's headers: content negotiation, the
// user agent, the format's own version and beta headers when client and upstream speak the same
// format, and a valid Idempotency-Key. Credentials, session and hop-by-hop headers never pass.
func upstreamHeader(in http.Header, src, dst Format) http.Header {
	// The keys are written canonical and the values shared, clipped so that an Add on this
	// header never writes into the client's (Header.Set would canonicalize each key again).
	h := make(http.Header, 8)
	h["Content-Type"] = jsonContentType
	for _, k := range [...]string{"Accept", "User-Agent"} {
		if v := in[k]; len(v) > 0 && v[0] != "" {
			h[k] = v[:1:1]
		}
	}
	if src == dst {
		if dst == FormatMessages {
			copyValues(h, in, "Anthropic-Version")
			copyValues(h, in, "Anthropic-Beta")
		} else {
			copyValues(h, in, "Openai-Beta")
		}
	}
	if dst == FormatMessages && h.Get("anthropic-version") == "" {
		h["Anthropic-Version"] = []string{anthropicVersion}
	}
	if v := in["Idempotency-Key"]; len(v) > 0 && ValidIdempotencyKey(v[0]) {
		h["Idempotency-Key"] = v[:1:1]
	}
	return h
}

// jsonContentType is the Content-Type of every upstream call; shared, and never changed in place
// (its capacity is its length, so an Add copies it).
var jsonContentType = []string{"application/json"}

// copyValues sets h's values of the canonical key k to in's, shared and clipped.
func copyValues(h, in http.Header, k string) {
	if v := in[k]; len(v) > 0 {
		h[k] = v[:len(v):len(v)]
	}
}

// withAuth is the header of one attempt: the call's header (shared values, clipped, so setting
// the credential never touches the call's own header that later attempts start from again).
func withAuth(base http.Header, p *catalog.ProviderEntry, conn *catalog.ConnEntry) http.Header {
	h := make(http.Header, len(base)+2)
	for k, v := range base {
		h[k] = v[:len(v):len(v)]
	}
	setAuth(h, p, conn)
	return h
}

// streamRelay turns the upstream's stream events into the client's, one at a time.
type streamRelay interface {
	// Event appends the client's bytes for one upstream event to dst; l is the relay's look at
	// the event (lookEvent).
	Event(dst, ev []byte, l eventLook) []byte
	// Done reports whether the upstream's terminal event was seen.
	Done() bool
}

// relay picks the stream relay of a call: the events as they are when client and upstream speak
// the same format, else a bridge through the conversation model.
func (c *call) relay() streamRelay {
	switch {
	case c.src == c.dst && c.dst == FormatChat:
		return &passthrough{format: FormatChat, rewriteError: appendOpenAIStreamError, hideUsage: c.hideUsage}
	case c.src == c.dst && c.dst == FormatMessages:
		return &passthrough{format: FormatMessages, model: c.asked}
	case c.src == c.dst:
		return &passthrough{format: FormatResponses, sequenced: true}
	}
	return newBridge(c.src, c.dst, c.req, c.start.Unix())
}

// translateBody turns a buffered upstream answer into the client's format, and reads its usage
// on the way (the answer is parsed once).
func (c *call) translateBody(b []byte) (out []byte, buf *[]byte, seen usageSeen, err error) {
	evs := eventBufs.Get().(*[]convo.Event)
	defer func() {
		clear(*evs)
		*evs = (*evs)[:0]
		eventBufs.Put(evs)
	}()
	if *evs, err = codecs[c.dst].readAnswer((*evs)[:0], b); err != nil {
		return nil, nil, seen, err
	}
	var u convo.Usage
	for i := range *evs {
		if (*evs)[i].Kind == convo.EvUsage {
			u.Merge((*evs)[i].Usage)
		}
	}
	seen.take(u)
	buf = answerBufs.Get().(*[]byte)
	if c.keepItem != nil { // a Responses client's answer whose items are kept (items.go)
		out, err = responses.AppendAnswerKeeping((*buf)[:0], c.req, *evs, c.start.Unix(), c.keepItem)
	} else {
		out, err = codecs[c.src].appendAnswer((*buf)[:0], c.req, *evs, c.start.Unix())
	}
	if err != nil {
		releaseAnswer(buf)
		return nil, nil, seen, err
	}
	*buf = out
	return out, buf, seen, nil
}

// eventBufs recycles the event lists whole answers are read into.
var eventBufs = sync.Pool{New: func() any { return new([]convo.Event) }}

// answerBufs recycles the buffers translated answers are written into. A translated answer is
// as large as the upstream's (10 KB and more is common); written into a fresh buffer each time
// it doubles what a translated request allocates, and the collector's work with it. A buffer
// goes back once its answer was written to the client.
var answerBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledAnswer: larger buffers (rare, long answers) are left to the collector rather than
// kept alive by the pool.
const maxPooledAnswer = 256 << 10

func releaseAnswer(buf *[]byte) {
	if buf != nil && cap(*buf) <= maxPooledAnswer {
		*buf = (*buf)[:0]
		answerBufs.Put(buf)
	}
}

// passthrough relays events as they came, ending each with its blank line.
type passthrough struct {
	format Format
	done   bool
	// hideUsage drops the usage chunk the gateway asked for on the client's behalf.
	hideUsage bool
	// sequenced: the format numbers its events (Responses); the last number is kept so an
	// error event closing a broken stream continues the sequence. failed and cut are set when
	// its terminal event was response.failed or response.incomplete.
	sequenced   bool
	seq         int64
	failed, cut bool
	// rewriteError, when set, writes the upstream's own error event in the client's documented
	// shape. errored is set once one passed.
	rewriteError func(dst, ev []byte) []byte
	errored      bool
	// model, when set, is what an Anthropic stream's message_start names (answermodel.go).
	model string
}

// Event relays one event; the look tells its end and error events (and, for Responses, the
// failed and cut-short ends), and a Responses event's sequence_number is kept.
func (p *passthrough) Event(dst, ev []byte, l eventLook) []byte {
	if p.hideUsage && usageOnlyChunk(ev) {
		return dst // asked for by the gateway, not by the client
	}
	if l.terminal {
		p.done, p.failed, p.cut = true, l.failed, l.cut
	}
	if p.sequenced && len(l.data) > 0 {
		if n := jsonAt(l.data, "sequence_number"); n.Exists() {
			p.seq = n.Int() + 1
		}
	}
	if l.errorEv {
		p.errored = true
		if p.rewriteError != nil {
			return p.rewriteError(dst, ev)
		}
	}
	if l.start && p.model != "" {
		return terminate(appendNamingModel(dst, ev, l.data, "message.model", p.model))
	}
	return append(dst, terminate(ev)...)
}

func (p *passthrough) Done() bool { return p.done }

// Errored reports whether the upstream's own error event was relayed.
func (p *passthrough) Errored() bool { return p.errored }

// Failed and Cut report a Responses stream that ended in response.failed or
// response.incomplete.
func (p *passthrough) Failed() bool { return p.failed }
func (p *passthrough) Cut() bool    { return p.cut }

// Abort closes a stream the gateway ends with an error event; a Responses one continues the
// sequence.
func (p *passthrough) Abort(dst []byte, code, msg string) []byte {
	if !p.sequenced {
		return append(dst, abortEvent(p.format, code, msg)...)
	}
	c, _ := json.Marshal(code)
	m, _ := json.Marshal(msg)
	return append(dst, fmt.Sprintf("event: error\ndata: {\"type\":\"error\",\"code\":%s,"+
		"\"message\":%s,\"param\":null,\"sequence_number\":%d}\n\n", c, m, p.seq)...)
}

// isChatError reports whether a chat completions event carries the upstream's error object. The
// cheap look for the key comes first: content never carries it unescaped.
func isChatError(ev []byte) bool {
	if !containsMark(ev, errorKey) {
		return false
	}
	_, _, ok := streamError(ev)
	return ok
}

// appendOpenAIStreamError writes an upstream's error event in OpenAI's documented shape, keeping
// its words: message and type strings, code a string or null, param.
func appendOpenAIStreamError(dst, ev []byte) []byte {
	_, data := convo.ParseEvent(ev)
	msg, code, typ, _, _ := resilience.ExtractError(data)
	out := openAIStreamError{Message: msg, Type: typ}
	if out.Message == "" {
		out.Message = "the upstream reported an error"
	}
	if out.Type == "" {
		out.Type = "upstream_error"
	}
	if code != "" {
		out.Code = &code
	}
	if p := gjson.GetBytes(data, "error.param"); p.Type == gjson.String {
		param := p.String()
		out.Param = &param
	}
	b, _ := json.Marshal(struct {
		Error openAIStreamError `json:"error"`
	}{out})
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n')
}

// openAIStreamError is the error object of an OpenAI stream's error event.
type openAIStreamError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    *string `json:"code"`
	Param   *string `json:"param"`
}

// finalError notes on the error how many upstream calls the request made, and tells the client
// not to retry once the gateway has retried or failed over itself: a client's own retries must
// add to the gateway's attempt budget, not multiply it.
func finalError(e *errs.Error, attempts int) {
	if attempts == 0 {
		return
	}
	d, _ := e.Diagnostics.(*Diagnostics)
	if d == nil {
		d = &Diagnostics{}
		e.Diagnostics = d
	}
	d.Attempts = attempts
	if status := e.HTTPStatus(); attempts > 1 && (status == http.StatusTooManyRequests || status >= 500) {
		if e.Header == nil {
			e.Header = http.Header{}
		}
		e.Header.Set("X-Should-Retry", "false")
	}
}

package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/tidwall/gjson"

	"switchyard/services/catalog"
	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// memSettings is an in-memory settings store.
type memSettings struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memSettings) GetValue(_ context.Context, k string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	return v, ok, nil
}

func (s *memSettings) SaveRevision(_ context.Context, k, v string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = v
	return int64(len(s.m)), nil
}

// codexTokens is the token holder of the accounts under test: each 401 reported for the current
// token rotates it.
type codexTokens struct {
	mu       sync.Mutex
	token    string
	n        int
	rejected []string
	dead     bool // a refresh fails
}

func (a *codexTokens) Token(context.Context, *catalog.ConnEntry) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token, nil
}
func (a *codexTokens) Secrets(int64) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return []string{a.token, "refresh-secret"}
}
func (a *codexTokens) TokenRejected(_ context.Context, _ *catalog.ConnEntry, rejected string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rejected = append(a.rejected, rejected)
	if a.dead {
		return "", io.EOF
	}
	if rejected == a.token {
		a.n++
		a.token = "access-" + strconv.Itoa(a.n)
	}
	return a.token, nil
}
func (*codexTokens) PollSoon(int64) {}
func (*codexTokens) LimitReset(context.Context, *catalog.ConnEntry) resilience.ResetOutcome {
	return resilience.ResetOutcome{}
}

// codexHarness is an engine with what a ChatGPT account's calls use, and a backend.
type codexHarness struct {
	t        *testing.T
	e        *Engine
	clk      *clockwork.FakeClock
	usage    *resilience.Usage
	cool     *resilience.Cooldowns
	locks    *resilience.Lockouts
	gate     *resilience.ProviderGate
	tokens   *codexTokens
	settings *settings.Service
	oauth    *settings.OAuthService
	provider *catalog.ProviderEntry
	srv      *httptest.Server
	answer   func(w http.ResponseWriter, r *http.Request) // the backend's answer
	seen     []*http.Request
	bodies   [][]byte
}

func newCodexHarness(t *testing.T) *codexHarness {
	t.Helper()
	ctx := context.Background()
	h := &codexHarness{t: t, clk: clockwork.NewFakeClockAt(time.Unix(1_800_000_000, 0)), tokens: &codexTokens{token: "access-0"}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.seen, h.bodies = append(h.seen, r), append(h.bodies, b)
		h.answer(w, r)
	}))
	t.Cleanup(h.srv.Close)
	env := map[string]string{"SWITCHYARD_CODEX_API_BASE_URL": h.srv.URL + "/backend-api/codex/"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var err error
	if h.settings, err = settings.New(ctx, &memSettings{m: map[string]string{}}, lookup, nil); err != nil {
		t.Fatal(err)
	}
	if _, err = h.settings.Patch(ctx, []byte(`{"provider_cooldown":{"enabled":true,"oauth":{"failure_threshold":1}}}`)); err != nil {
		t.Fatal(err)
	}
	if h.oauth, err = settings.NewOAuth(ctx, &memSettings{m: map[string]string{}}, lookup, nil); err != nil {
		t.Fatal(err)
	}
	h.usage = resilience.NewUsage(h.clk, nil)
	h.cool = resilience.NewCooldowns(h.clk, nil)
	h.gate = resilience.NewProviderGate(h.clk)
	h.locks = resilience.NewLockouts(h.clk, resilience.LockoutConfig{Enabled: true, ErrorCodes: []int{429}, Base: time.Minute,
		Max: 30 * time.Minute, MaxSteps: 10, Exponential: true}, nil)
	h.e = New(Options{Clock: h.clk, Log: slog.New(slog.DiscardHandler), Settings: h.settings, OAuthSettings: h.oauth,
		Accounts: h.tokens, Usage: h.usage, Cooldowns: h.cool, Lockouts: h.locks, Gate: h.gate, SessionKey: []byte("k")})
	h.provider = &catalog.ProviderEntry{Name: "codex", Type: catalog.TypeCodex, UpstreamFormat: catalog.UpstreamResponses, ResponsesAPI: true}
	return h
}

func codexConn(id int64, account string) *catalog.ConnEntry {
	return &catalog.ConnEntry{ID: id, Name: "chatgpt-" + strconv.FormatInt(id, 10), Provider: "codex", ProviderType: catalog.TypeCodex,
		AuthType: catalog.AuthOAuth, OAuth: &catalog.OAuthCredential{Account: catalog.OAuthAccount{UUID: account, Email: "ada@example.com"}}}
}

// call prepares a client request of format src toward the provider, as serve does.
func (h *codexHarness) call(src Format, raw string, in http.Header) *call {
	h.t.Helper()
	req, derr := DecodeRequest([]byte(raw))
	if derr != nil {
		h.t.Fatal(derr)
	}
	if in == nil {
		in = http.Header{}
	}
	c, perr := h.e.prepare(target{provider: h.provider, model: "gpt-5-codex"}, req, in, &Trace{}, src, false)
	if perr != nil {
		h.t.Fatal(perr)
	}
	return c
}

// attempt runs attemptOn on conn, as the work loop does.
func (h *codexHarness) attempt(c *call, conn *catalog.ConnEntry) attemptResult {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	c.trace.attempt(conn, "first", h.clk.Now())
	return h.e.attemptOn(ctx, cancel, httptest.NewRecorder(), c, conn, time.Time{})
}

// codexStream is a realistic backend stream: reasoning, then text, usage with cached and
// reasoning tokens. The completed response carries no output, as the backend sends it.
const codexStream = "event: response.created\n" +
	`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1800000000,"status":"in_progress","model":"gpt-5-codex","output":[]}}` + "\n\n" +
	"event: response.output_item.added\n" +
	`data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}` + "\n\n" +
	"event: response.output_item.done\n" +
	`data: {"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"gAAA"}}` + "\n\n" +
	"event: response.output_item.added\n" +
	`data: {"type":"response.output_item.added","sequence_number":3,"output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant","status":"in_progress","content":[]}}` + "\n\n" +
	"event: response.output_text.delta\n" +
	`data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Hello"}` + "\n\n" +
	"event: response.output_text.delta\n" +
	`data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":1,"content_index":0,"delta":", world"}` + "\n\n" +
	"event: response.output_item.done\n" +
	`data: {"type":"response.output_item.done","sequence_number":6,"output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hello, world","annotations":[]}]}}` + "\n\n" +
	"event: response.completed\n" +
	`data: {"type":"response.completed","sequence_number":7,"response":{"id":"resp_1","object":"response","created_at":1800000000,"status":"completed","model":"gpt-5-codex","output":[],` +
	`"usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":100},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":150}}}` + "\n\n"

func sse(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func TestCodexBody(t *testing.T) {
	tests := []struct {
		name, in string
		same     bool     // the body goes as it came
		dropped  []string // in order
		want     map[string]string
	}{
		{name: "the codex CLI's own body", same: true,
			in: `{"model":"gpt-5-codex","instructions":"You are Codex.","input":[],"tools":[],"store":false,"stream":true,"include":[],"prompt_cache_key":"c-1"}`},
		{name: "a translated body", dropped: []string{"max_output_tokens"},
			in:   `{"model":"gpt-5-codex","instructions":"Be brief.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"max_output_tokens":64,"store":false}`,
			want: map[string]string{"instructions": `"Be brief."`, "stream": "true", "store": "false", "input.0.content.0.text": `"hi"`}},
		{name: "no instructions, store asked for, no stream", in: `{"model":"m","input":[],"store":true,"stream":false}`,
			want: map[string]string{"instructions": `""`, "stream": "true", "store": "false"}},
		{name: "instructions null", in: `{"model":"m","instructions":null,"input":[],"stream":true,"store":false}`,
			want: map[string]string{"instructions": `""`}},
		{name: "refused parameters", dropped: []string{"temperature", "top_p", "max_output_tokens", "user", "truncation"},
			in:   `{"model":"m","temperature":0.2,"top_p":1,"input":[],"max_output_tokens":10,"user":"u","truncation":"auto","reasoning":{"effort":"high"}}`,
			want: map[string]string{"reasoning.effort": `"high"`, "temperature": "", "top_p": "", "max_output_tokens": "", "user": "", "truncation": ""}},
		{name: "a plain prompt", in: `{"model":"m","input":"say \"hi\""}`,
			want: map[string]string{"input.0.role": `"user"`, "input.0.type": `"message"`, "input.0.content.0.type": `"input_text"`,
				"input.0.content.0.text": `"say \"hi\""`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			out, dropped := codexBody(in)
			if tc.same {
				if &out[0] != &in[0] || len(out) != len(in) {
					t.Fatalf("the body was copied: %s", out)
				}
				return
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			if !slices.Equal(dropped, tc.dropped) {
				t.Fatalf("dropped %q, want %q", dropped, tc.dropped)
			}
			for path, raw := range tc.want {
				if got := gjson.GetBytes(out, path).Raw; got != raw {
					t.Errorf("%s = %s, want %s\nbody %s", path, got, raw, out)
				}
			}
			if n := strings.Count(string(out), `"stream"`); n != 1 {
				t.Fatalf("%d stream fields: %s", n, out)
			}
			// Once made the backend's, a body is left as it is.
			if again, d := codexBody(out); &again[0] != &out[0] || d != nil {
				t.Fatalf("a second pass changed the body: %s", again)
			}
		})
	}
}

// The call goes to the configured base's /responses with the Codex CLI's headers and the
// account's token, never the client's credentials; the refused parameters are named once.
func TestCodexOutgoing(t *testing.T) {
	h := newCodexHarness(t)
	h.answer = func(w http.ResponseWriter, _ *http.Request) { sse(w, 200, codexStream) }
	in := http.Header{"Authorization": {"Bearer sk-client-key"}, "X-Api-Key": {"sk-client-key"}, "User-Agent": {"my-app/1.0"},
		"Cookie": {"c=1"}, "X-Session-Id": {"sess-1"}}
	c := h.call(FormatChat, `{"model":"codex/gpt-5-codex","stream":true,"max_tokens":100,"temperature":0.5,"messages":[{"role":"user","content":"hi"}]}`, in)
	conn := codexConn(1, "acct-ada")
	res := h.attempt(c, conn)
	if res.err != nil {
		t.Fatalf("attempt failed: %v", res.err)
	}
	res.discard()
	r := h.seen[0]
	if r.URL.Path != "/backend-api/codex/responses" {
		t.Fatalf("path %s", r.URL.Path)
	}
	for k, want := range map[string]string{"Authorization": "Bearer access-0", "Chatgpt-Account-Id": "acct-ada",
		"Openai-Beta": "responses=experimental", "Originator": "codex_cli_rs", "Accept": "text/event-stream",
		"Session_id": "sess-1", "User-Agent": "my-app/1.0", "Content-Type": "application/json"} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"X-Api-Key", "Cookie", "X-Session-Id"} {
		if r.Header.Get(k) != "" {
			t.Errorf("client header %s was forwarded", k)
		}
	}
	body := h.bodies[0]
	if gjson.GetBytes(body, "stream").Raw != "true" || gjson.GetBytes(body, "store").Raw != "false" ||
		gjson.GetBytes(body, "instructions").Type != gjson.String || gjson.GetBytes(body, "max_output_tokens").Exists() ||
		gjson.GetBytes(body, "model").String() != "gpt-5-codex" {
		t.Fatalf("body %s", body)
	}
	if !slices.Contains(c.trace.Dropped, "max_output_tokens") || !slices.Contains(c.trace.Dropped, "temperature") {
		t.Fatalf("dropped %q", c.trace.Dropped)
	}
	n := len(c.trace.Dropped)

	// Another account of the same session sees an id of its own; a second call on the call's
	// body names nothing again.
	res = h.attempt(c, codexConn(2, "acct-bob"))
	res.discard()
	if got := h.seen[1].Header.Get("Session_id"); got == "sess-1" || !uuidRE.MatchString(got) {
		t.Fatalf("second account's session id %q", got)
	}
	if h.seen[1].Header.Get("Chatgpt-Account-Id") != "acct-bob" || len(c.trace.Dropped) != n {
		t.Fatalf("account %q, dropped %q", h.seen[1].Header.Get("Chatgpt-Account-Id"), c.trace.Dropped)
	}

	// A provider's own base URL wins over the setting.
	h.provider.BaseURL = h.srv.URL + "/elsewhere"
	res = h.attempt(h.call(FormatResponses, `{"model":"codex/gpt-5-codex","input":"hi","stream":true}`, nil), conn)
	res.discard()
	if got := h.seen[2].URL.Path; got != "/elsewhere/responses" {
		t.Fatalf("path %s", got)
	}
	if h.seen[2].Header.Get("Session_id") != "" {
		t.Fatal("a session id without a client session")
	}
}

// A client that asked for no stream gets the backend's stream as one answer in its own format,
// with the usage the stream reported.
func TestCodexAnswerCollectsTheStream(t *testing.T) {
	h := newCodexHarness(t)
	h.answer = func(w http.ResponseWriter, _ *http.Request) { sse(w, 200, codexStream) }
	tests := []struct {
		name  string
		src   Format
		raw   string
		check map[string]string
	}{
		{"chat", FormatChat, `{"model":"codex/gpt-5-codex","messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"object": "chat.completion", "choices.0.message.content": "Hello, world", "choices.0.finish_reason": "stop",
				"usage.prompt_tokens": "120", "usage.completion_tokens": "30", "usage.prompt_tokens_details.cached_tokens": "100",
				"usage.completion_tokens_details.reasoning_tokens": "20"}},
		{"messages", FormatMessages, `{"model":"codex/gpt-5-codex","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"type": "message", "content.#(type==\"text\").text": "Hello, world", "stop_reason": "end_turn",
				"usage.output_tokens": "30", "usage.cache_read_input_tokens": "100"}},
		{"responses", FormatResponses, `{"model":"codex/gpt-5-codex","input":"hi","max_output_tokens":50}`,
			map[string]string{"object": "response", "status": "completed", "output.#(type==\"message\").content.0.text": "Hello, world",
				"usage.input_tokens": "120", "usage.output_tokens_details.reasoning_tokens": "20"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := h.call(tc.src, tc.raw, nil)
			res := h.attempt(c, codexConn(1, "acct-ada"))
			if res.err != nil {
				t.Fatalf("attempt failed: %v", res.err)
			}
			if !res.translated || res.status != 200 || !json.Valid(res.body) {
				t.Fatalf("answer %d %s", res.status, res.body)
			}
			for path, want := range tc.check {
				if got := gjson.GetBytes(res.body, path).String(); got != want {
					t.Errorf("%s = %q, want %q\n%s", path, got, want, res.body)
				}
			}
			u := res.usage.usage()
			if u.Input != 120 || u.Output != 30 || u.CacheRead != 100 || u.Reasoning != 20 {
				t.Fatalf("usage %+v", u)
			}
			last := h.bodies[len(h.bodies)-1]
			if gjson.GetBytes(last, "stream").Raw != "true" || gjson.GetBytes(last, "max_output_tokens").Exists() {
				t.Fatalf("the backend got %s", last)
			}
			releaseAnswer(res.pooled)
		})
	}
}

// What goes wrong in a collected stream is a failed attempt: nothing reached the client.
func TestCodexAnswerFailures(t *testing.T) {
	cut := codexStream[:strings.Index(codexStream, "event: response.completed")]
	tests := []struct {
		name      string
		answer    func(w http.ResponseWriter)
		status    int
		transport bool
		reason    resilience.Reason
	}{
		{"cut before its end", func(w http.ResponseWriter) { sse(w, 200, cut) }, 0, true, resilience.ReasonServerError},
		{"response.failed", func(w http.ResponseWriter) {
			sse(w, 200, cut+"event: response.failed\n"+`data: {"type":"response.failed","response":{"id":"resp_1","status":"failed",`+
				`"error":{"code":"server_error","message":"The model failed to answer."}}}`+"\n\n")
		}, 502, false, resilience.ReasonServerError},
		{"an error event", func(w http.ResponseWriter) {
			sse(w, 200, "event: error\n"+`data: {"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached; try again in 20s"}`+"\n\n")
		}, 502, false, resilience.ReasonRateLimit},
		{"json instead of a stream", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","output":[]}`)
		}, 502, false, resilience.ReasonServerError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newCodexHarness(t)
			h.answer = func(w http.ResponseWriter, _ *http.Request) { tc.answer(w) }
			c := h.call(FormatChat, `{"model":"codex/gpt-5-codex","messages":[{"role":"user","content":"hi"}]}`, nil)
			conn := codexConn(1, "acct-ada")
			res := h.attempt(c, conn)
			if res.err == nil || res.body != nil {
				t.Fatalf("an answer was made: %s", res.body)
			}
			if res.status != tc.status || res.transport != tc.transport {
				t.Fatalf("status %d transport %v, want %d %v", res.status, res.transport, tc.status, tc.transport)
			}
			f := h.e.fail(c, conn, res)
			if f.outcome.Reason != tc.reason || !f.outcome.Failover {
				t.Fatalf("outcome %+v", f.outcome)
			}
		})
	}
}

// A 401 is tried once more with a refreshed token; a second 401 is the answer.
func TestAttemptCodexRefreshesOnce(t *testing.T) {
	h := newCodexHarness(t)
	h.answer = func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer access-1" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Your authentication token has expired.","code":"token_expired"}}`)
			return
		}
		sse(w, 200, codexStream)
	}
	c := h.call(FormatChat, `{"model":"codex/gpt-5-codex","messages":[{"role":"user","content":"hi"}]}`, nil)
	res := h.attempt(c, codexConn(1, "acct-ada"))
	if res.err != nil || !strings.Contains(string(res.body), "Hello, world") {
		t.Fatalf("after the refresh: %v %s", res.err, res.body)
	}
	if len(h.seen) != 2 || !slices.Equal(h.tokens.rejected, []string{"access-0"}) {
		t.Fatalf("%d calls, rejected %q", len(h.seen), h.tokens.rejected)
	}
	if len(c.trace.Chain) != 2 || c.trace.Chain[0].Reason != "token_rejected" || c.trace.Chain[1].Kind != "retry" {
		t.Fatalf("chain %+v", c.trace.Chain)
	}

	h.answer = func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) }
	res = h.attempt(h.call(FormatChat, `{"model":"codex/gpt-5-codex","messages":[{"role":"user","content":"hi"}]}`, nil), codexConn(1, "acct-ada"))
	if res.status != http.StatusUnauthorized || len(h.seen) != 4 {
		t.Fatalf("status %d after %d calls", res.status, len(h.seen))
	}
}

// Every answer's usage headers are stored; the usage wall stores the window it hit as full until
// the announced reset and rests the connection exactly that long, without a backoff step and
// without a word to the provider's breaker, health or cooldown gate.
func TestCodexUsageWall(t *testing.T) {
	h := newCodexHarness(t)
	now := h.clk.Now()
	usageHeaders := func(w http.ResponseWriter, five, weekly string) {
		w.Header().Set("x-codex-primary-used-percent", five)
		w.Header().Set("x-codex-primary-window-minutes", "300")
		w.Header().Set("x-codex-primary-reset-after-seconds", "7200")
		w.Header().Set("x-codex-secondary-used-percent", weekly)
		w.Header().Set("x-codex-secondary-window-minutes", "10080")
		w.Header().Set("x-codex-secondary-reset-at", strconv.FormatInt(now.Add(96*time.Hour).Unix(), 10))
	}
	h.answer = func(w http.ResponseWriter, _ *http.Request) {
		usageHeaders(w, "37.5", "12")
		sse(w, 200, codexStream)
	}
	conn := codexConn(1, "acct-ada")
	res := h.attempt(h.call(FormatChat, `{"model":"codex/gpt-5-codex","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil), conn)
	res.discard()
	u, ok := h.usage.Get(1)
	if !ok || u.FiveHour.Utilization != 37.5 || !u.FiveHour.ResetsAt.Equal(now.Add(2*time.Hour)) ||
		u.SevenDay.Utilization != 12 || !u.SevenDay.ResetsAt.Equal(now.Add(96*time.Hour)) {
		t.Fatalf("usage after a success: %+v %+v", u.FiveHour, u.SevenDay)
	}

	reset := now.Add(time.Hour)
	h.answer = func(w http.ResponseWriter, _ *http.Request) {
		usageHeaders(w, "100", "40")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus",`+
			`"resets_at":`+strconv.FormatInt(reset.Unix(), 10)+`,"resets_in_seconds":3600}}`)
	}
	c := h.call(FormatChat, `{"model":"codex/gpt-5-codex","messages":[{"role":"user","content":"hi"}]}`, nil)
	res = h.attempt(c, conn)
	if res.status != http.StatusTooManyRequests {
		t.Fatalf("status %d", res.status)
	}
	u, _ = h.usage.Get(1)
	if u.FiveHour.Utilization != 100 || !u.FiveHour.ResetsAt.Equal(reset) || u.SevenDay.Utilization != 40 {
		t.Fatalf("usage at the wall: %+v %+v", u.FiveHour, u.SevenDay)
	}
	if at, until := h.usage.AtWall(1, 100); !at || !until.Equal(reset) {
		t.Fatalf("at the wall %v until %v", at, until)
	}
	f := h.e.fail(c, conn, res)
	if f.outcome.Reason != resilience.ReasonQuotaExhausted || !f.outcome.UntilReset || !f.outcome.Failover {
		t.Fatalf("outcome %+v", f.outcome)
	}
	st := h.cool.Get(1)
	if !st.Until.Equal(reset) || st.Level != 0 || st.LastErrorType != resilience.ReasonQuotaExhausted {
		t.Fatalf("cooldown until %v (want %v) level %d reason %s", st.Until, reset, st.Level, st.LastErrorType)
	}
	if f.result != (resilience.Result{}) {
		t.Fatalf("the breaker and health would hear of it: %+v", f.result)
	}
	if ok, _ := h.gate.Check("codex", h.settings.Snapshot().Resilience().ProviderCooldown); !ok {
		t.Fatal("the provider's cooldown gate counted the account's quota")
	}
	if l := h.locks.List(h.clk.Now()); len(l) != 0 {
		t.Fatalf("the model was locked out: %+v", l)
	}
	if f.err.HTTPStatus() != http.StatusTooManyRequests || f.err.RetryAfter != time.Hour {
		t.Fatalf("client error %d retry after %v", f.err.HTTPStatus(), f.err.RetryAfter)
	}

	// A plain rate limit still reaches the gate: the exception is the usage window only.
	h.answer = func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTooManyRequests) }
	c = h.call(FormatChat, `{"model":"codex/gpt-5-codex","messages":[{"role":"user","content":"hi"}]}`, nil)
	res = h.attempt(c, codexConn(2, "acct-bob"))
	if f := h.e.fail(c, codexConn(2, "acct-bob"), res); f.outcome.UntilReset || f.result == (resilience.Result{}) {
		t.Fatalf("a plain 429: %+v", f)
	}
	if ok, _ := h.gate.Check("codex", h.settings.Snapshot().Resilience().ProviderCooldown); ok {
		t.Fatal("a plain 429 did not reach the gate")
	}
}

package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FakeCodex plays the Codex backend of ChatGPT accounts (chatgpt.com/backend-api/codex): POST
// …/responses, checked as strictly as the real one checks the Codex CLI's requests. It takes a
// bearer token only when tokens names its account (FakeOpenAIAuth.AccountOf) and only with that
// account in chatgpt-account-id; it requires stream true, store false and instructions, refuses
// the output limit with 400 ("Unsupported parameter"), streams a Responses answer (reasoning,
// then text, usage with cached and reasoning tokens; its response.completed carries no output,
// as the backend's does), refuses reasoning sent back sealed for another account (400
// invalid_encrypted_content: each account's reasoning is sealed for it, CodexSeal), reports each account's usage windows in x-codex-* headers on every
// answer, and answers an account's usage wall (429 usage_limit_reached) when one is set. GET
// …/models lists its models, OpenAI style.
type FakeCodex struct {
	*httptest.Server
	t      testing.TB
	tokens func(token string) string

	mu    sync.Mutex
	usage map[string]CodexUsage  // account id → the windows its answers report
	walls map[string]*CodexLimit // account id → the usage wall it answers
	log   requestLog
	// Text is the answer's text.
	Text string
}

// CodexText is the text FakeCodex answers with by default.
const CodexText = "Hello from the Codex backend."

// The usage the fake reports for each answer: 1,200 input tokens of which 1,000 were cached, 80
// output tokens of which 48 were reasoning.
const (
	CodexInputTokens, CodexCachedTokens, CodexOutputTokens, CodexReasoningTokens = 1200, 1000, 80, 48
)

// CodexWindow is one usage window as the fake reports it.
type CodexWindow struct {
	UsedPercent   float64
	WindowMinutes int
	// ResetAfter is sent as reset-after-seconds when > 0; ResetAt as reset-at (unix seconds)
	// when set.
	ResetAfter time.Duration
	ResetAt    time.Time
}

// CodexUsage is what the fake's answers for an account say of its windows: the primary (the
// 5-hour window) and the secondary (the weekly one); nil = not reported.
type CodexUsage struct {
	Primary, Secondary *CodexWindow
}

// CodexLimit is a usage wall the fake answers for an account: 429 with the error type
// (usage_limit_reached by default), the plan and the reset as resets_at and resets_in_seconds
// (each sent when set).
type CodexLimit struct {
	Type     string
	Plan     string
	ResetsAt time.Time
	ResetsIn time.Duration
}

// NewFakeCodex starts the fake; tokens tells the account of a bearer token ("" = not valid).
// It stops with the test.
func NewFakeCodex(t testing.TB, tokens func(token string) string) *FakeCodex {
	f := &FakeCodex{t: t, tokens: tokens, usage: map[string]CodexUsage{}, walls: map[string]*CodexLimit{}, Text: CodexText}
	f.Server = startServer(t, f.serve)
	return f
}

// BaseURL is the backend's address as codex.api_base_url or a provider's base_url names it.
func (f *FakeCodex) BaseURL() string { return f.URL + "/backend-api/codex" }

// SetUsage sets the windows the account's answers report.
func (f *FakeCodex) SetUsage(accountID string, u CodexUsage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usage[accountID] = u
}

// SetLimit makes the account's requests answer the usage wall l; nil lifts it.
func (f *FakeCodex) SetLimit(accountID string, l *CodexLimit) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l == nil {
		delete(f.walls, accountID)
		return
	}
	c := *l
	if c.Type == "" {
		c.Type = "usage_limit_reached"
	}
	f.walls[accountID] = &c
}

// Requests returns the /responses requests received, in order.
func (f *FakeCodex) Requests() []Recorded { return f.log.all() }

// AccountsCalled lists the chatgpt-account-id of each /responses request, in order.
func (f *FakeCodex) AccountsCalled() []string {
	var out []string
	for _, r := range f.Requests() {
		out = append(out, r.Header.Get("Chatgpt-Account-Id"))
	}
	return out
}

func (f *FakeCodex) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		f.responses(w, r)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		if f.tokens(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) == "" {
			codexDetail(w, http.StatusUnauthorized, "Could not parse your authentication token. Please try signing in again.")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"gpt-5-codex","object":"model","owned_by":"openai"},`+
			`{"id":"gpt-5","object":"model","owned_by":"openai"}]}`)
	default:
		http.NotFound(w, r)
	}
}

// codexDetail answers an error the way the backend does for requests it refuses.
func codexDetail(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"detail": detail})
}

func (f *FakeCodex) responses(w http.ResponseWriter, r *http.Request) {
	body := f.log.record(r)

	account := f.tokens(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	if account == "" || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Provided authentication token is expired. Please try signing in again.",`+
			`"type":"invalid_request_error","param":null,"code":"token_expired"}}`)
		return
	}
	if got := r.Header.Get("Chatgpt-Account-Id"); got != account {
		codexDetail(w, http.StatusForbidden, fmt.Sprintf("chatgpt-account-id %q does not match the token's account", got))
		return
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		codexDetail(w, http.StatusBadRequest, "Invalid JSON body")
		return
	}
	for _, refused := range []string{"max_output_tokens", "max_completion_tokens"} {
		if _, ok := req[refused]; ok {
			codexDetail(w, http.StatusBadRequest, "Unsupported parameter: "+refused)
			return
		}
	}
	switch {
	case string(req["stream"]) != "true":
		codexDetail(w, http.StatusBadRequest, "Stream must be set to true")
		return
	case string(req["store"]) != "false":
		codexDetail(w, http.StatusBadRequest, "Store must be set to false")
		return
	case len(req["instructions"]) == 0 || req["instructions"][0] != '"':
		codexDetail(w, http.StatusBadRequest, "Instructions are required")
		return
	case len(req["input"]) == 0 || req["input"][0] != '[':
		codexDetail(w, http.StatusBadRequest, "Input must be a list")
		return
	}
	var model string
	if json.Unmarshal(req["model"], &model) != nil || model == "" {
		codexDetail(w, http.StatusBadRequest, "Model is required")
		return
	}
	// Reasoning comes back sealed for the account that wrote it: another account's cannot be
	// read, and the whole request is refused.
	var input []struct {
		Type      string `json:"type"`
		Encrypted string `json:"encrypted_content"`
	}
	json.Unmarshal(req["input"], &input)
	for _, it := range input {
		if it.Type == "reasoning" && it.Encrypted != CodexSeal(account) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"The encrypted content gAAA...ed== could not be verified.",`+
				`"type":"invalid_request_error","param":null,"code":"invalid_encrypted_content"}}`)
			return
		}
	}

	f.mu.Lock()
	usage, wall, text := f.usage[account], f.walls[account], f.Text
	f.mu.Unlock()
	usage.write(w.Header())
	if wall != nil {
		e := map[string]any{"type": wall.Type, "message": "The usage limit has been reached"}
		if wall.Plan != "" {
			e["plan_type"] = wall.Plan
		}
		if !wall.ResetsAt.IsZero() {
			e["resets_at"] = wall.ResetsAt.Unix()
		}
		if wall.ResetsIn > 0 {
			e["resets_in_seconds"] = int64(wall.ResetsIn / time.Second)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		json.NewEncoder(w).Encode(map[string]any{"error": e})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	for _, ev := range codexEvents(model, text, CodexSeal(account)) {
		io.WriteString(w, ev)
		if fl != nil {
			fl.Flush()
		}
	}
}

// write puts the usage windows in x-codex-* headers.
func (u CodexUsage) write(h http.Header) {
	for _, w := range []struct {
		name string
		win  *CodexWindow
	}{{"primary", u.Primary}, {"secondary", u.Secondary}} {
		if w.win == nil {
			continue
		}
		p := "x-codex-" + w.name + "-"
		h.Set(p+"used-percent", strconv.FormatFloat(w.win.UsedPercent, 'f', -1, 64))
		if w.win.WindowMinutes > 0 {
			h.Set(p+"window-minutes", strconv.Itoa(w.win.WindowMinutes))
		}
		if w.win.ResetAfter > 0 {
			h.Set(p+"reset-after-seconds", strconv.FormatInt(int64(w.win.ResetAfter/time.Second), 10))
		}
		if !w.win.ResetAt.IsZero() {
			h.Set(p+"reset-at", strconv.FormatInt(w.win.ResetAt.Unix(), 10))
		}
	}
}

// CodexSeal is the encrypted content of the reasoning FakeCodex writes for an account, and the
// only one it takes back from that account.
func CodexSeal(account string) string { return "gAAAAABcodex-sealed-for-" + account }

// codexEvents is the backend's stream of one answer: the text in a few deltas after a reasoning
// item with encrypted content (seal).
func codexEvents(model, text, seal string) []string {
	seq := 0
	ev := func(typ string, fields map[string]any) string {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(fields)
		return "event: " + typ + "\ndata: " + string(b) + "\n\n"
	}
	resp := func(status string, usage map[string]any) map[string]any {
		r := map[string]any{"id": "resp_codex_1", "object": "response", "created_at": 1_800_000_000, "status": status,
			"model": model, "output": []any{}, "parallel_tool_calls": true, "store": false}
		if usage != nil {
			r["usage"] = usage
		}
		return r
	}
	msg := map[string]any{"id": "msg_codex_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []any{}}
	out := []string{
		ev("response.created", map[string]any{"response": resp("in_progress", nil)}),
		ev("response.in_progress", map[string]any{"response": resp("in_progress", nil)}),
		ev("response.output_item.added", map[string]any{"output_index": 0,
			"item": map[string]any{"id": "rs_codex_1", "type": "reasoning", "summary": []any{}}}),
		ev("response.output_item.done", map[string]any{"output_index": 0,
			"item": map[string]any{"id": "rs_codex_1", "type": "reasoning", "summary": []any{}, "encrypted_content": seal}}),
		ev("response.output_item.added", map[string]any{"output_index": 1, "item": msg}),
		ev("response.content_part.added", map[string]any{"item_id": "msg_codex_1", "output_index": 1, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}),
	}
	words := strings.SplitAfter(text, " ")
	for _, w := range words {
		out = append(out, ev("response.output_text.delta", map[string]any{"item_id": "msg_codex_1", "output_index": 1,
			"content_index": 0, "delta": w}))
	}
	part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
	done := map[string]any{"id": "msg_codex_1", "type": "message", "role": "assistant", "status": "completed", "content": []any{part}}
	out = append(out,
		ev("response.output_text.done", map[string]any{"item_id": "msg_codex_1", "output_index": 1, "content_index": 0, "text": text}),
		ev("response.content_part.done", map[string]any{"item_id": "msg_codex_1", "output_index": 1, "content_index": 0, "part": part}),
		ev("response.output_item.done", map[string]any{"output_index": 1, "item": done}),
		ev("response.completed", map[string]any{"response": resp("completed", map[string]any{
			"input_tokens": CodexInputTokens, "input_tokens_details": map[string]any{"cached_tokens": CodexCachedTokens},
			"output_tokens": CodexOutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": CodexReasoningTokens},
			"total_tokens": CodexInputTokens + CodexOutputTokens})}))
	return out
}

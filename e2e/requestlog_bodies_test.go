package e2e

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// loggedBodies is what GET /api/requests/{id} says of a request's bodies.
type loggedBodies struct {
	RequestBody   *string `json:"request_body"`
	ResponseBody  *string `json:"response_body"`
	BodyTruncated bool    `json:"body_truncated"`
}

// TestRequestLogBodies: with --request-log-body-kib the log keeps the start of each request's
// and answer's body, cut on a character boundary and redacted — the connection's key (even when
// an upstream leaks it in a good answer), the gateway's own client key, key-shaped strings and
// the values of fields that name secrets — visible through the API and, escaped, on the detail
// page; a stream keeps its first events. The bodies go with their rows.
func TestRequestLogBodies(t *testing.T) {
	const connKey = "conn.plain.secret.77"
	answer := `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant",` +
		`"content":"Hello, your key is ` + connKey + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
	up := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if b, _ := io.ReadAll(r.Body); strings.Contains(string(b), `"stream":true`) {
			testenv.SSEAnswer(testenv.SSEChunks, -1)(w, r)
			return
		}
		testenv.JSONAnswer(answer)(w, r)
	})
	e := testenv.New(t, "--request-log-body-kib", "1")
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", connKey, 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")

	providerKey := "sk-proj-" + strings.Repeat("P", 30)
	long := strings.Repeat("äöü ", 400) // 2,800 bytes of two-byte runes: the cut falls inside the text
	body := `{"model":"up/gpt-test","api_key":"plain-value-123","metadata":{"password":"hunter2"},"messages":[{"role":"user",` +
		`"content":"<script>alert(1)</script> my keys: ` + key + ` and ` + providerKey + ` then ` + long + `"}]}`
	r := e.Chat(context.Background(), key, body)
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("chat: %d %s", r.StatusCode, got)
	}
	logged := requestLog(t, e, "?surface=/v1/chat/completions")
	if len(logged) != 1 {
		t.Fatalf("%d chat requests logged", len(logged))
	}
	path := fmt.Sprintf("/api/requests/%d", logged[0].ID)
	var b loggedBodies
	if code := e.API("GET", path, nil, &b); code != 200 || b.RequestBody == nil || b.ResponseBody == nil {
		t.Fatalf("detail: %d %+v", code, b)
	}
	req, resp := *b.RequestBody, *b.ResponseBody
	if !b.BodyTruncated || len(req) > 1024 || len(req) < 1000 || !utf8.ValidString(req) || strings.ContainsRune(req, utf8.RuneError) {
		t.Fatalf("request body not cut on a character boundary near 1 KiB (truncated %v, %d bytes): %q", b.BodyTruncated, len(req), req)
	}
	if !strings.HasPrefix(req, `{"model":"up/gpt-test","api_key":"[redacted]","metadata":{"password":"[redacted]"}`) ||
		!strings.Contains(req, "my keys: [redacted] and [redacted] then äöü") {
		t.Fatalf("request body: %q", req)
	}
	if !strings.Contains(resp, `"content":"Hello, your key is [redacted]"`) {
		t.Fatalf("answer body: %q", resp)
	}
	raw := e.MustAPI("GET", path, nil, 200)
	noSecret := func(where, text string) {
		t.Helper()
		for _, s := range []string{connKey, key, providerKey, "plain-value-123", "hunter2"} {
			if strings.Contains(text, s) {
				t.Errorf("%s holds %q", where, s)
			}
		}
	}
	noSecret("the API answer", fmt.Sprint(raw))

	// The detail page shows both, escaped, with the note that the request was cut short.
	c := e.Login()
	code, page := testenv.Fetch(t, c, "GET", e.Base+fmt.Sprintf("/requests/%d", logged[0].ID), nil, nil)
	if code != 200 || !strings.Contains(page, `id="request-body"`) || !strings.Contains(page, `id="response-body"`) ||
		!strings.Contains(page, `<pre class="code body-text"`) || strings.Contains(page, "<script>alert(1)") ||
		!strings.Contains(page, html.EscapeString("<script>alert(1)</script>")) ||
		!strings.Contains(page, testenv.Esc(i18n.EN, "requests.body_truncated")) || strings.Contains(page, `id="bodies-off"`) {
		t.Fatalf("detail page: %d\n%s", code, testenv.Between(page, `id="bodies"`, "</section>"))
	}
	noSecret("the detail page", page)

	// A stream keeps the first events that went to the client.
	r = e.Chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	testenv.ReadAll(t, r)
	logged = requestLog(t, e, "?surface=/v1/chat/completions")
	if code := e.API("GET", fmt.Sprintf("/api/requests/%d", logged[0].ID), nil, &b); code != 200 || b.ResponseBody == nil ||
		!strings.HasPrefix(*b.ResponseBody, "data: {") || !strings.Contains(*b.ResponseBody, `"Hel"`) || b.BodyTruncated {
		t.Fatalf("stream: %d %+v", code, b)
	}

	// Bodies go with their rows.
	e.Clock.Advance(8 * 24 * time.Hour)
	testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
	if got := requestLog(t, e, "?surface=/v1/chat/completions"); len(got) != 1 {
		t.Fatalf("%d rows after the retention passed", len(got))
	}
	if code := e.API("GET", path, nil, nil); code != 404 {
		t.Fatalf("a pruned row still answers: %d", code)
	}
}

// TestRequestLogBodiesOffByDefault: without the setting no body is kept; the API has none and the
// detail page says so in one line.
func TestRequestLogBodiesOffByDefault(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"up/gpt-test","api_key":"plain-value-123","messages":[]}`))
	logged := requestLog(t, e, "?surface=/v1/chat/completions")
	if len(logged) != 1 {
		t.Fatalf("%d chat requests logged", len(logged))
	}
	raw := e.MustAPI("GET", fmt.Sprintf("/api/requests/%d", logged[0].ID), nil, 200)
	if _, ok := raw["request_body"]; ok {
		t.Fatalf("a request body was kept: %v", raw)
	}
	if _, ok := raw["response_body"]; ok || raw["body_truncated"] != false {
		t.Fatalf("an answer body was kept: %v", raw)
	}
	c := e.Login()
	code, page := testenv.Fetch(t, c, "GET", e.Base+fmt.Sprintf("/requests/%d", logged[0].ID), nil, nil)
	if code != 200 || !strings.Contains(page, `id="bodies-off"`) || !strings.Contains(page, testenv.Esc(i18n.EN, "requests.bodies_off")) ||
		strings.Contains(page, `id="request-body"`) || strings.Contains(page, "plain-value-123") {
		t.Fatalf("detail page: %d\n%s", code, testenv.Between(page, `id="bodies"`, "</section>"))
	}
}

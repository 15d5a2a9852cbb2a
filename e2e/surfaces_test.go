package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// browserAccept is what a browser sends when it navigates to a page.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

// Every surface answers with and without /v1, so both base-URL habits work: the Anthropic SDKs
// append /v1/messages to http://host, @ai-sdk/anthropic appends /messages to http://host/v1 (and
// so, given http://host, calls /messages), and an OpenAI client given http://host calls
// /chat/completions, /models and /responses. Errors on the addresses without /v1 are in the
// caller's format; the request log and the metrics name both addresses by the /v1 route.
func TestSurfacesAnswerWithAndWithoutV1(t *testing.T) {
	e, key := sdkGateway(t)
	ctx := context.Background()

	// The official Anthropic SDK: base URL without /v1, it calls /v1/messages.
	ac := anthropic.NewClient(option.WithBaseURL(e.Base+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "anthropic/claude-test", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))}})
	if err != nil || msg.StopReason != "tool_use" {
		t.Fatalf("Anthropic SDK on /v1/messages: %v %+v", err, msg)
	}
	// @ai-sdk/anthropic's habit: its headers, and /messages straight after the base URL.
	aiSDK := map[string]string{"x-api-key": key, "anthropic-version": "2023-06-01", "content-type": "application/json"}
	ask := `{"model":"anthropic/claude-test","max_tokens":64,"messages":[{"role":"user","content":"Weather in Paris?"}]}`
	st, _, body := testenv.Call(t, testenv.NoRedirect(), "POST", e.Base+"/messages", ask, aiSDK)
	if st != 200 || gjson.Get(body, "type").String() != "message" || gjson.Get(body, "stop_reason").String() != "tool_use" {
		t.Fatalf("POST /messages: %d %s", st, body)
	}
	// Translated, to the OpenAI-compatible provider, the same.
	st, _, body = testenv.Call(t, testenv.NoRedirect(), "POST", e.Base+"/messages", strings.Replace(ask, "anthropic/claude-test", "up/gpt-test", 1), aiSDK)
	if st != 200 || gjson.Get(body, "type").String() != "message" {
		t.Fatalf("POST /messages, translated: %d %s", st, body)
	}
	// count_tokens answers alike on both addresses.
	count := `{"model":"anthropic/claude-test","messages":[{"role":"user","content":"hi"}]}`
	st1, _, b1 := testenv.Call(t, testenv.NoRedirect(), "POST", e.Base+"/v1/messages/count_tokens", count, aiSDK)
	st2, _, b2 := testenv.Call(t, testenv.NoRedirect(), "POST", e.Base+"/messages/count_tokens", count, aiSDK)
	if st1 != st2 || b1 != b2 || strings.Contains(b2, "Nothing answers") {
		t.Fatalf("count_tokens: /v1 %d %s, without /v1 %d %s", st1, b1, st2, b2)
	}

	// The official OpenAI SDK given the gateway's address without /v1.
	oc := openai.NewClient(oopt.WithBaseURL(e.Base+"/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
	cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "up/gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")}})
	if err != nil || len(cc.Choices) != 1 || cc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("OpenAI SDK on /chat/completions: %v %+v", err, cc)
	}
	page, err := oc.Models.List(ctx)
	if err != nil || !hasModel(page.Data, "up/gpt-test") || !hasModel(page.Data, "anthropic/claude-test") {
		t.Fatalf("OpenAI SDK on /models: %v %+v", err, page)
	}
	if m, err := oc.Models.Get(ctx, "up/gpt-test"); err != nil || m.ID != "up/gpt-test" {
		t.Fatalf("OpenAI SDK on /models/{id}: %v %+v", err, m)
	}
	resp, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "up/gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")}})
	if err != nil || len(resp.Output) == 0 {
		t.Fatalf("OpenAI SDK on /responses: %v %+v", err, resp)
	}
	// The model list in Anthropic's shape when asked by an Anthropic client; like every proxy
	// answer, without the dashboard's page headers.
	st, h, body := testenv.Call(t, testenv.NoRedirect(), "GET", e.Base+"/models", "", aiSDK)
	if st != 200 || gjson.Get(body, "data.0.type").String() != "model" || !gjson.Get(body, "has_more").Exists() {
		t.Fatalf("GET /models for an Anthropic client: %d %s", st, body)
	}
	if h.Get("Content-Security-Policy") != "" || h.Get("X-Frame-Options") != "" {
		t.Errorf("GET /models carries page headers: %v", h)
	}
	// Codex's WebSocket attempt on /responses gets the same 426 as on /v1/responses.
	st, _, body = testenv.Call(t, testenv.NoRedirect(), "GET", e.Base+"/responses", "", map[string]string{"Authorization": "Bearer " + key,
		"Upgrade": "websocket", "Connection": "Upgrade"})
	if st != http.StatusUpgradeRequired || gjson.Get(body, "error.code").String() != "websocket_unsupported" {
		t.Fatalf("WebSocket upgrade on /responses: %d %s", st, body)
	}

	// Errors without /v1 come in the caller's format.
	for _, c := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		anthropic                bool
		code                     string // OpenAI error.code or Anthropic error.type
	}{
		{"messages without a key", "POST", "/messages", ask, map[string]string{"anthropic-version": "2023-06-01"}, 401, true, "authentication_error"},
		{"messages with broken JSON", "POST", "/messages", `{"model":`, aiSDK, 400, true, "invalid_request_error"},
		{"chat with a wrong key", "POST", "/chat/completions", testenv.ChatBody, map[string]string{"Authorization": "Bearer sk-sy-wrong"}, 401, false, "invalid_api_key"},
		{"chat with an unknown model", "POST", "/chat/completions", `{"model":"nobody/nope","messages":[]}`, map[string]string{"Authorization": "Bearer " + key}, 404, false, "model_not_found"},
		{"models for an Anthropic client without a key", "GET", "/models", "", map[string]string{"anthropic-version": "2023-06-01"}, 401, true, "authentication_error"},
		{"responses without a key", "POST", "/responses", `{}`, nil, 401, false, "missing_api_key"},
	} {
		st, h, body := testenv.Call(t, testenv.NoRedirect(), c.method, e.Base+c.path, c.body, c.header)
		got := gjson.Get(body, "error.code").String()
		if c.anthropic {
			got = gjson.Get(body, "error.type").String()
			if gjson.Get(body, "type").String() != "error" {
				got = "not Anthropic's shape"
			}
		}
		if st != c.status || got != c.code || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %s, want %d %s", c.name, st, body, c.status, c.code)
		}
	}

	// The request log and the metrics name each surface by its /v1 route, whichever address.
	// (A request is logged and counted just after its answer went out.)
	e.Eventually("3 messages and 2 chat requests logged", func() bool {
		return len(requestLog(t, e, "?surface=/v1/messages&status=200")) == 3 &&
			len(requestLog(t, e, "?surface=/v1/chat/completions")) == 2
	})
	for _, bare := range []string{"/messages", "/chat/completions", "/models", "/responses"} {
		if got := requestLog(t, e, "?surface="+bare); len(got) != 0 {
			t.Errorf("requests logged under %s: %+v", bare, got)
		}
	}
	counted := []struct {
		route, status string
		want          float64
	}{
		{"/v1/messages", "200", 3}, {"/v1/responses", "200", 1}, {"/v1/models/{id}", "200", 1}, {"/v1/responses", "426", 1},
		{"/v1/chat/completions", "200", 1}, {"/v1/chat/completions", "404", 1}, {"/v1/messages", "400", 1},
	}
	countOf := func(m, route, status string) float64 {
		labels := `route="` + route + `",status="` + status + `"`
		return metricSum(m, "switchyard_requests_total", func(l string) bool { return strings.Contains(l, labels) })
	}
	var m string
	e.Eventually("every request counted in the metrics by its /v1 route", func() bool {
		m = e.Metrics()
		for _, c := range counted {
			if countOf(m, c.route, c.status) != c.want {
				return false
			}
		}
		return true
	})
	for _, bare := range []string{`route="/messages"`, `route="/chat/completions"`, `route="/models"`, `route="/responses"`} {
		if strings.Contains(m, bare) {
			t.Errorf("metrics have a route label %s", bare)
		}
	}
}

func hasModel(list []openai.Model, id string) bool {
	for _, m := range list {
		if m.ID == id {
			return true
		}
	}
	return false
}

// An address nothing serves, called by an API client (an API key header, or no text/html in
// Accept), gets a JSON 404 in that client's format that names the address, never the HTML login
// page; so does a dashboard address called by such a client without a session (the admin API
// keeps its own shape). Browsers still go to the login page.
func TestUnknownAddressesAnswerAPIClientsInTheirFormat(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	curl := map[string]string{"Accept": "*/*"}
	withKey := map[string]string{"Authorization": "Bearer " + key, "Accept": browserAccept}
	anthropicKey := map[string]string{"x-api-key": key, "anthropic-version": "2023-06-01"}
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		anthropic          bool
	}{
		{"curl, an unknown address", "GET", "/nothing/here", curl, false},
		{"an OpenAI client with a doubled path", "POST", "/v1/v1/chat/completions", withKey, false},
		{"an OpenAI client with a base URL missing a segment", "POST", "/openai/chat/completions", withKey, false},
		{"an Anthropic client with a wrong base URL", "POST", "/anthropic/v1/messages", anthropicKey, true},
		{"an Anthropic client on an unknown /v1 address", "GET", "/v1/files", anthropicKey, true},
		{"curl on the dashboard's root", "GET", "/", curl, false},
		{"curl on a dashboard page", "GET", "/providers", curl, false},
		{"an Anthropic client on a dashboard page", "GET", "/providers", anthropicKey, true},
		{"an SDK posting to a dashboard form", "POST", "/keys", withKey, false},
		{"a key and a browser's Accept on a dashboard page", "GET", "/settings", withKey, false},
	} {
		st, h, body := testenv.Call(t, testenv.NoRedirect(), c.method, e.Base+c.path, `{}`, c.header)
		shape := gjson.Get(body, "error.code").String() == "not_found" && gjson.Get(body, "error.type").String() == "invalid_request_error"
		if c.anthropic {
			shape = gjson.Get(body, "type").String() == "error" && gjson.Get(body, "error.type").String() == "not_found_error"
		}
		if st != http.StatusNotFound || !shape || !strings.HasPrefix(h.Get("Content-Type"), "application/json") ||
			!strings.Contains(gjson.Get(body, "error.message").String(), c.method+" "+c.path) || h.Get("Location") != "" {
			t.Errorf("%s: %s %s → %d %q %s", c.name, c.method, c.path, st, h.Get("Location"), body)
		}
	}
	// The admin API answers in its own shape.
	st, _, body := testenv.Call(t, testenv.NoRedirect(), "GET", e.Base+"/api/nothing", "", map[string]string{"Authorization": "Bearer " + testenv.AdminToken})
	if st != http.StatusNotFound || gjson.Get(body, "error.code").String() != "not_found" || gjson.Get(body, "error.type").Exists() {
		t.Errorf("unknown admin API address: %d %s", st, body)
	}

	// Browsers: the dashboard's pages (and unknown addresses) still send them to the login;
	// htmx is told where to go; once logged in an unknown address is an HTML page.
	for _, path := range []string{"/providers", "/", "/nothing/here"} {
		st, h, _ := testenv.Call(t, testenv.NoRedirect(), "GET", e.Base+path, "", map[string]string{"Accept": browserAccept})
		if st != http.StatusSeeOther || h.Get("Location") != "/login?next="+path {
			t.Errorf("a browser on %s: %d %q, want a redirect to the login", path, st, h.Get("Location"))
		}
	}
	if st, h, _ := testenv.Call(t, testenv.NoRedirect(), "GET", e.Base+"/providers/state", "", map[string]string{"HX-Request": "true", "Accept": "*/*"}); st != http.StatusUnauthorized || h.Get("HX-Redirect") != "/login" {
		t.Errorf("htmx without a session: %d %q", st, h.Get("HX-Redirect"))
	}
	c := e.Login()
	code, page := testenv.Fetch(t, c, "GET", e.Base+"/nothing/here", nil, map[string]string{"Accept": browserAccept})
	if code != http.StatusNotFound || !strings.Contains(page, "<html") {
		t.Errorf("a logged-in browser on an unknown address: %d", code)
	}
	// A client holding a session reaches the pages whatever it accepts.
	if code, page := testenv.Fetch(t, c, "GET", e.Base+"/providers", nil, nil); code != http.StatusOK || !strings.Contains(page, "<html") {
		t.Errorf("a logged-in client without Accept on /providers: %d", code)
	}
	if code, _ := testenv.Fetch(t, c, "POST", e.Base+"/keys", url.Values{"name": {"k"}}, nil); code != http.StatusOK {
		t.Errorf("a logged-in client posting a form: %d", code)
	}
}

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// trap is where redirecting upstreams point. It answers like a good upstream (a completion, a
// stream, a model list), so a followed redirect would look like success; it counts every call
// and keeps the credentials it was sent.
type trap struct {
	*httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	keys []string
}

func newTrap(t *testing.T) *trap {
	tr := &trap{}
	tr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.hits.Add(1)
		tr.mu.Lock()
		tr.keys = append(tr.keys, r.Header.Get("Authorization")+r.Header.Get("x-api-key"))
		tr.mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/models"):
			testenv.JSONAnswer(`{"object":"list","data":[{"id":"gpt-test","object":"model"}]}`)(w, r)
		case strings.HasSuffix(r.URL.Path, "/messages"):
			testenv.MessagesAnswer()(w, r)
		case strings.Contains(mustReadString(r), `"stream":true`):
			testenv.SSEAnswer(testenv.SSEChunks, -1)(w, r)
		default:
			testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
		}
	}))
	t.Cleanup(tr.Close)
	return tr
}

func mustReadString(r *http.Request) string { return string(mustRead(r)) }

// Secrets a redirect's Location carries (user info, a query value): they never reach an answer,
// the log or the request log.
const (
	locUser   = "admin:hunter2"
	locSecret = "trapQUERYsecret"
)

// location is a Location at the trap for the request, with user info and a query secret.
func (tr *trap) location(r *http.Request) string {
	u, _ := url.Parse(tr.URL)
	return "http://" + locUser + "@" + u.Host + r.URL.Path + "?token=" + locSecret
}

// redirect answers every request with status, pointing at the trap.
func (tr *trap) redirect(status *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", tr.location(r))
		w.WriteHeader(int(status.Load()))
	}
}

func (tr *trap) host() string {
	u, _ := url.Parse(tr.URL)
	return u.Host
}

// noLeak fails when a text holds a secret of a redirect's Location.
func noLeak(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{"hunter2", locSecret} {
		if strings.Contains(text, s) {
			t.Fatalf("%s holds %q: %s", what, s, text)
		}
	}
}

// Upstream redirects are never followed: an upstream answering 301, 302, 307 or 308 on chat
// completions (OpenAI-compatible) or messages (Anthropic-compatible, whose x-api-key Go would
// carry along) is a failed attempt. On every surface, streamed or not, the client gets a 502 in
// its format naming the redirect and where it pointed, without the Location's user info or query;
// the attempt chain and the log name the target the same way; the address it pointed at is never
// called.
func TestUpstreamRedirectsAreNeverFollowed(t *testing.T) {
	tr := newTrap(t)
	var status atomic.Int64
	up := testenv.NewFakeUpstream(t, tr.redirect(&status))
	ant := testenv.NewFakeAnthropic(t, tr.redirect(&status))
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-up-REDIRECTED-0001", 0)
	e.AddProviderOfType("ant", "anthropic-compatible", ant.URL)
	e.AddConnection("ant", "main", "sk-ant-REDIRECTED-0002", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	e.WaitModels(key, "ant/claude-test")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"circuit_breaker": map[string]any{"enabled": false}}, 200)

	for _, code := range []int{301, 302, 307, 308} {
		status.Store(int64(code))
		for _, model := range []string{"up/gpt-test", "ant/claude-test"} {
			for _, s := range surfaces {
				for _, stream := range []bool{false, true} {
					t.Run(fmt.Sprintf("%d/%s/%s/stream=%v", code, model, s.name, stream), func(t *testing.T) {
						e.MustAPI("POST", "/api/resilience/reset", nil, 200)
						body := s.body(model)
						if stream {
							body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
						}
						r := e.Post(context.Background(), s.path, key, body, map[string]string{"anthropic-version": "2023-06-01"})
						got := testenv.ReadAll(t, r)
						if r.StatusCode != 502 {
							t.Fatalf("status %d: %s", r.StatusCode, got)
						}
						checkShape(t, s.name, got)
						msg := gjson.Get(got, "error.message").String()
						if !strings.Contains(msg, fmt.Sprintf("HTTP %d, a redirect to http://%s/", code, tr.host())) {
							t.Fatalf("the message does not name the redirect: %s", got)
						}
						if s.name == "messages" {
							if typ := gjson.Get(got, "error.type").String(); typ != "api_error" {
								t.Fatalf("type %s: %s", typ, got)
							}
						} else if c := gjson.Get(got, "error.code").String(); c != "upstream_redirect" {
							t.Fatalf("code %s: %s", c, got)
						}
						noLeak(t, "the answer", got)
					})
				}
			}
		}
	}
	if n := tr.hits.Load(); n != 0 {
		t.Fatalf("the redirect target was called %d times, with %v", n, tr.keys)
	}
	noLeak(t, "the log", e.Logs.String())
	if !strings.Contains(e.Logs.String(), `location="http://`+tr.host()+`/v1/messages?token=[redacted]"`) {
		t.Fatal("the log does not name the redirect's target")
	}
	logged := requestLog(t, e, "?provider=ant&limit=1")
	detail := e.MustAPI("GET", fmt.Sprintf("/api/requests/%d", logged[0].ID), nil, 200)
	a := detail["attempts"].([]any)[0].(map[string]any)
	if a["status"].(float64) != 308 || a["reason"] != "upstream_redirect" ||
		a["detail"] != "http://"+tr.host()+"/v1/messages?token=[redacted]" || detail["error_code"] != "upstream_redirect" {
		t.Fatalf("attempt chain %v", detail)
	}
	noLeak(t, "the request log", fmt.Sprint(detail, requestLog(t, e, "")))
}

// A redirect fails over like a server error: the request moves to the next connection, which
// serves it, and the redirecting connection cools (as a 502); the request log's chain shows both
// calls. With nowhere else to go it counts for the breaker like a 5xx.
func TestUpstreamRedirectFailsOverAndOpensTheBreaker(t *testing.T) {
	tr := newTrap(t)
	var status atomic.Int64
	status.Store(307)
	e, up, key, a, b := twoKeysBAnswers(t, tr.redirect(&status))
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || body != testenv.CompletionJSON {
		t.Fatalf("the sibling must serve the request: %d %s", r.StatusCode, body)
	}
	if sa, sb := e.State(a), e.State(b); sa.Status != "cooling" || sa.Reason != "server_error" || sa.ErrorCode != 502 || sb.Status != "active" {
		t.Fatalf("a %+v, b %+v", sa, sb)
	}
	if n := len(up.ChatRequests()); n != 2 || tr.hits.Load() != 0 {
		t.Fatalf("%d upstream calls, %d at the redirect target", n, tr.hits.Load())
	}
	logged := requestLog(t, e, "?surface=/v1/chat/completions")
	var d loggedRequest
	e.API("GET", fmt.Sprintf("/api/requests/%d", logged[0].ID), nil, &d)
	if d.Status != 200 || d.AttemptCount != 2 || d.Failovers != 1 || d.Retries != 0 || len(d.Attempts) != 2 ||
		d.Attempts[0].Connection != "a" || d.Attempts[0].Status != 307 || d.Attempts[0].Reason != "upstream_redirect" ||
		d.Attempts[1].Connection != "b" || d.Attempts[1].Kind != "failover" || d.Attempts[1].Status != 200 {
		t.Fatalf("request log %+v", d)
	}

	// One connection that redirects, a breaker that opens after one failure: the next request
	// is refused by the open breaker without an upstream call.
	up2 := testenv.NewFakeUpstream(t, tr.redirect(&status))
	e.AddProvider("solo", up2.URL+"/v1")
	e.AddConnection("solo", "main", "sk-solo", 0)
	e.WaitModels(key, "solo/gpt-test")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"circuit_breaker": map[string]any{"enabled": true, "failure_threshold": 1}}, 200)
	r = e.Chat(context.Background(), key, `{"model":"solo/gpt-test","messages":[]}`)
	if body := testenv.ReadAll(t, r); r.StatusCode != 502 || gjson.Get(body, "error.code").String() != "upstream_redirect" {
		t.Fatalf("first: %d %s", r.StatusCode, body)
	}
	r = e.Chat(context.Background(), key, `{"model":"solo/gpt-test","messages":[]}`)
	if body := testenv.ReadAll(t, r); r.StatusCode != 503 || gjson.Get(body, "error.code").String() != "circuit_open" || len(up2.ChatRequests()) != 1 {
		t.Fatalf("second: %d %s (%d calls)", r.StatusCode, body, len(up2.ChatRequests()))
	}
	if tr.hits.Load() != 0 {
		t.Fatal("the redirect target was called")
	}
}

// Model discovery and the connection test never follow a redirect of the model list: the
// provider's discovery fails naming the redirect, the test says so, the target is never called.
func TestModelListRedirectsAreNeverFollowed(t *testing.T) {
	tr := newTrap(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", tr.location(r))
		w.WriteHeader(http.StatusFound)
	}))
	t.Cleanup(up.Close)
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	id := e.AddConnection("up", "main", "sk-listing-0001", 0)
	e.Eventually("discovery failed", func() bool { return e.ProviderStatus("up")["discovery_error"] != nil })
	if msg := e.ProviderStatus("up")["discovery_error"].(string); !strings.Contains(msg, "HTTP 302, a redirect to") ||
		!strings.Contains(msg, tr.host()) {
		t.Fatalf("discovery error %q", msg)
	}
	res := e.MustAPI("POST", fmt.Sprintf("/api/connections/%d/test", id), nil, 200)
	if res["ok"] != false || !strings.Contains(res["message"].(string), "a redirect to") {
		t.Fatalf("connection test %v", res)
	}
	// The dashboard's provider page frames it in the reader's words, the target apart.
	c := e.Login()
	_, page := testenv.Fetch(t, c, "GET", e.Base+"/providers", nil, nil)
	if !strings.Contains(page, "a redirect, which is not followed") || !strings.Contains(page, "http://"+tr.host()+"/v1/models?token=[redacted]") {
		t.Fatal("the providers page does not show the redirect")
	}
	noLeak(t, "the providers page", page)
	noLeak(t, "the state", fmt.Sprint(e.MustAPI("GET", "/api/resilience/state", nil, 200), res))
	noLeak(t, "the log", e.Logs.String())
	if tr.hits.Load() != 0 {
		t.Fatalf("the redirect target was called %d times", tr.hits.Load())
	}
}

// redirector stands in front of the fake Claude: the calls redirect says redirect are answered
// with a 307 to the fake itself (which would serve them: following would work), the others are
// passed on.
type redirector struct {
	*httptest.Server
	on atomic.Pointer[func(r *http.Request) bool]
}

func newRedirector(t *testing.T, f *testenv.FakeClaude) *redirector {
	target, _ := url.Parse(f.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	rd := &redirector{}
	rd.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if on := rd.on.Load(); on != nil && (*on)(r) {
			w.Header().Set("Location", f.URL+r.URL.Path+"?code="+locSecret+"&"+r.URL.RawQuery)
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rd.Close)
	return rd
}

func (rd *redirector) redirect(f func(r *http.Request) bool) { rd.on.Store(&f) }

// The Claude account calls never follow a redirect: the sign-in's code exchange (which carries
// the code and its verifier), the token refresh (the single-use refresh token), the usage poll
// and the limit reset (the account's token). Each fails naming the redirect; the endpoint it
// pointed at, which would have answered, is never called.
func TestOAuthCallsNeverFollowRedirects(t *testing.T) {
	l := newLaneEnv(t, false, true)
	e, f := l.Env, l.f
	rd := newRedirector(t, f)
	e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"claude": map[string]any{
		"token_url": rd.URL + "/v1/oauth/token", "usage_url": rd.URL + "/api/oauth/usage"}}, 200)
	tokenCalls := func() int { return len(f.Requests("/v1/oauth/token")) }

	// Sign-in: the code exchange is refused, the code never reaches the token endpoint.
	rd.redirect(func(r *http.Request) bool { return r.URL.Path == "/v1/oauth/token" })
	before := tokenCalls()
	start := e.MustAPI("POST", "/api/oauth/claude/start", nil, 200)
	var out map[string]any
	st := e.API("POST", "/api/oauth/claude/complete", map[string]any{"code": f.Authorize(start["auth_url"].(string), "bob@example.com")}, &out)
	if st != 502 || !strings.Contains(fmt.Sprint(out), "HTTP 307") || !strings.Contains(fmt.Sprint(out), "a redirect to") {
		t.Fatalf("complete: %d %v", st, out)
	}
	if tokenCalls() != before {
		t.Fatal("the code exchange followed the redirect")
	}

	// Refresh: a strike naming the redirect; the refresh token never reaches the endpoint.
	e.Clock.Advance(8*time.Hour - 5*time.Minute)
	e.Eventually("the refresh failed", func() bool { return connState(e, l.id)["token"].(map[string]any)["strikes"].(float64) == 1 })
	if tok := connState(e, l.id)["token"].(map[string]any); !strings.Contains(tok["last_error"].(string), "a redirect to") ||
		f.Refreshes.Load() != 0 || tokenCalls() != before {
		t.Fatalf("token %v, %d refreshes", tok, f.Refreshes.Load())
	}
	rd.redirect(func(*http.Request) bool { return false })
	e.Clock.Advance(time.Minute) // the next try after the strike's back-off goes through
	e.Eventually("refreshed", func() bool { return f.Refreshes.Load() == 1 })
	e.Eventually("the refreshed token is committed", func() bool {
		return connState(e, l.id)["token"].(map[string]any)["strikes"].(float64) == 0
	})

	// Usage poll: the poll fails naming the redirect and the usage API is not called.
	rd.redirect(func(r *http.Request) bool { return r.URL.Path == "/api/oauth/usage" })
	usageCalls := len(f.Requests("/api/oauth/usage"))
	e.Clock.Advance(5 * time.Minute)
	e.Eventually("the poll failed", func() bool {
		pe, _ := connState(e, l.id)["usage"].(map[string]any)["poll_error"].(string)
		return strings.Contains(pe, "a redirect to")
	})
	if n := len(f.Requests("/api/oauth/usage")); n != usageCalls {
		t.Fatalf("the usage poll followed the redirect (%d calls, %d before)", n, usageCalls)
	}

	// Limit reset: the check passes, the claim is redirected and fails; no claim reaches the
	// endpoint, and the wall's 429 takes the normal path.
	rd.redirect(func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/reset_rate_limits")
	})
	l.script.push(l.wall(""))
	if st, body := l.post(); st != 429 {
		t.Fatalf("at the wall: %d %s", st, body)
	}
	if f.ResetChecks.Load() != 1 || f.ResetClaims.Load() != 0 {
		t.Fatalf("%d checks, %d claims", f.ResetChecks.Load(), f.ResetClaims.Load())
	}
	if lane := l.lane(); lane["reset_result"] != "error" {
		t.Fatalf("lane %v", lane)
	}
	noLeak(t, "the log", e.Logs.String())
	noLeak(t, "the state", fmt.Sprint(e.MustAPI("GET", "/api/resilience/state", nil, 200)))
}

package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// FakeGitHub plays GitHub and Copilot for Copilot accounts on one server: the device flow
// (/login/device/code, /login/oauth/access_token: pending until Approve, one slow_down when
// asked), the user API (/user), the Copilot token exchange (/copilot_internal/v2/token: counted,
// refresh_in and each user's Copilot access scriptable) and the Copilot API under /copilot (the
// address its tokens name): POST /copilot/chat/completions and GET /copilot/models, both of
// which check the bearer is a current Copilot token and the Copilot Chat headers are there.
type FakeGitHub struct {
	*httptest.Server
	t testing.TB
	// Clock dates the Copilot tokens' expires_at (UseFakeGitHub sets the gateway's; nil = real).
	Clock clockwork.Clock

	mu      sync.Mutex
	n       int
	devices map[string]*fakeDevice // device_code → flow
	byUser  map[string]string      // user_code → device_code
	github  map[string]string      // GitHub token → login
	ids     map[string]int64       // login → id
	copilot map[string]string      // Copilot token → login
	revoked map[string]bool        // Copilot tokens the Copilot API refuses with 401
	refused map[string]bool        // logins without Copilot
	models  []string
	log     requestLog

	// SlowDownOn makes the device poll with this number (1 = the first) answer slow_down
	// (0 = never).
	SlowDownOn atomic.Int64
	// Polls counts the device polls; Exchanges the Copilot token exchanges.
	Polls     atomic.Int64
	Exchanges atomic.Int64
	// RefreshIn is the refresh_in of issued Copilot tokens, in seconds (default 1500); they
	// expire 30 minutes after issue.
	RefreshIn atomic.Int64
	// Chat answers POST /copilot/chat/completions (a streamed or a plain completion when nil).
	Chat http.HandlerFunc
}

type fakeDevice struct {
	userCode string
	login    string // set by Approve
	denied   bool
	polls    int
}

// NewFakeGitHub starts the fake; it stops with the test.
func NewFakeGitHub(t testing.TB) *FakeGitHub {
	f := &FakeGitHub{t: t, devices: map[string]*fakeDevice{}, byUser: map[string]string{}, github: map[string]string{},
		ids: map[string]int64{}, copilot: map[string]string{}, revoked: map[string]bool{}, refused: map[string]bool{},
		models: []string{"gpt-4.1", "claude-sonnet-4"}}
	f.RefreshIn.Store(1500)
	f.Server = startServer(t, f.serve)
	return f
}

// Approve plays the person entering userCode at github.com/login/device as login (id).
func (f *FakeGitHub) Approve(userCode, login string, id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.devices[f.byUser[userCode]]
	if d == nil {
		f.t.Fatalf("no device flow with user code %s", userCode)
	}
	d.login, f.ids[login] = login, id
}

// Deny plays the person refusing the sign-in.
func (f *FakeGitHub) Deny(userCode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.devices[f.byUser[userCode]]; d != nil {
		d.denied = true
	}
}

// SetEntitled gives login Copilot access or takes it away (the exchange then answers 403).
func (f *FakeGitHub) SetEntitled(login string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused[login] = !ok
}

// SetModels sets what GET /copilot/models lists.
func (f *FakeGitHub) SetModels(models ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.models = models
}

// RevokeCopilot makes the Copilot API refuse a Copilot token with 401.
func (f *FakeGitHub) RevokeCopilot(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked[token] = true
}

// Tokens lists every GitHub and Copilot token issued so far.
func (f *FakeGitHub) Tokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.AppendSeq(slices.Collect(maps.Keys(f.github)), maps.Keys(f.copilot))
}

// ChatRequests returns the POST /copilot/chat/completions requests received so far.
func (f *FakeGitHub) ChatRequests() []Recorded { return f.Requests("/copilot/chat/completions") }

// Requests returns every request with the path.
func (f *FakeGitHub) Requests(path string) []Recorded { return f.log.at(path) }

// CopilotLogin names the account of a Copilot token ("" when it is none of ours).
func (f *FakeGitHub) CopilotLogin(token string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.copilot[token]
}

func (f *FakeGitHub) now() time.Time {
	if f.Clock != nil {
		return f.Clock.Now()
	}
	return time.Now()
}

func (f *FakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	b := f.log.record(r)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/login/device/code":
		form, _ := url.ParseQuery(string(b))
		if r.Method != http.MethodPost || form.Get("client_id") == "" || r.Header.Get("Accept") != "application/json" {
			w.WriteHeader(400)
			return
		}
		f.mu.Lock()
		f.n++
		code, user := fmt.Sprintf("ghdev_%04d_secret", f.n), fmt.Sprintf("WDJB-%04d", f.n)
		f.devices[code], f.byUser[user] = &fakeDevice{userCode: user}, code
		f.mu.Unlock()
		fmt.Fprintf(w, `{"device_code":%q,"user_code":%q,"verification_uri":"https://github.com/login/device","expires_in":900,"interval":5}`, code, user)
	case "/login/oauth/access_token":
		f.poll(w, b)
	case "/user":
		f.mu.Lock()
		login := f.github[strings.TrimPrefix(r.Header.Get("Authorization"), "token ")]
		id := f.ids[login]
		f.mu.Unlock()
		if login == "" {
			w.WriteHeader(401)
			io.WriteString(w, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`)
			return
		}
		fmt.Fprintf(w, `{"login":%q,"id":%d,"type":"User"}`, login, id)
	case "/copilot_internal/v2/token":
		f.exchange(w, r)
	case "/copilot/chat/completions", "/copilot/models":
		if msg := f.checkCopilot(r); msg != "" {
			w.WriteHeader(401)
			fmt.Fprintf(w, `{"error":{"message":%q,"code":"unauthorized"}}`, msg)
			return
		}
		if r.URL.Path == "/copilot/models" {
			f.mu.Lock()
			var data []string
			for _, m := range f.models {
				data = append(data, fmt.Sprintf(`{"id":%q,"object":"model","model_picker_enabled":true,"capabilities":{"type":"chat","family":%q}}`, m, m))
			}
			f.mu.Unlock()
			fmt.Fprintf(w, `{"object":"list","data":[%s]}`, strings.Join(data, ","))
			return
		}
		if f.Chat != nil {
			f.Chat(w, r)
			return
		}
		if strings.Contains(string(b), `"stream":true`) {
			SSEAnswer(SSEChunks, -1)(w, r)
			return
		}
		io.WriteString(w, CompletionJSON)
	default:
		http.NotFound(w, r)
	}
}

// poll answers a device poll: slow_down when scripted, pending until approved, then the token.
func (f *FakeGitHub) poll(w http.ResponseWriter, b []byte) {
	form, _ := url.ParseQuery(string(b))
	if form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:device_code" {
		io.WriteString(w, `{"error":"unsupported_grant_type"}`)
		return
	}
	n := f.Polls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.devices[form.Get("device_code")]
	switch {
	case d == nil:
		io.WriteString(w, `{"error":"incorrect_device_code","error_description":"The device_code provided is not valid."}`)
	case n == f.SlowDownOn.Load():
		io.WriteString(w, `{"error":"slow_down","error_description":"Too many requests have been made in the same timeframe.","interval":10}`)
	case d.denied:
		io.WriteString(w, `{"error":"access_denied","error_description":"The authorization request was denied."}`)
	case d.login == "":
		io.WriteString(w, `{"error":"authorization_pending","error_description":"The authorization request is still pending."}`)
	default:
		delete(f.devices, form.Get("device_code"))
		f.n++
		token := fmt.Sprintf("gho_%s%04dabcdefghijklmnop", d.login, f.n)
		f.github[token] = d.login
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","scope":"read:user"}`, token)
	}
}

// exchange answers the Copilot token exchange for a GitHub token.
func (f *FakeGitHub) exchange(w http.ResponseWriter, r *http.Request) {
	f.Exchanges.Add(1)
	gh := strings.TrimPrefix(r.Header.Get("Authorization"), "token ")
	f.mu.Lock()
	defer f.mu.Unlock()
	login := f.github[gh]
	switch {
	case login == "":
		w.WriteHeader(401)
		io.WriteString(w, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`)
		return
	case r.Header.Get("Editor-Version") == "" || r.Header.Get("Editor-Plugin-Version") == "":
		w.WriteHeader(400)
		io.WriteString(w, `{"message":"editor headers missing"}`)
		return
	case f.refused[login]:
		w.WriteHeader(403)
		fmt.Fprintf(w, `{"message":"Resource not accessible by integration: %s is not authorized to use Copilot (token %s)","error_details":{"notification_id":"no_copilot_access","title":"Copilot access not found"}}`, login, gh)
		return
	}
	f.n++
	token := fmt.Sprintf("tid=cop_%s_%04d;exp=%d;sku=copilot_pro;8kp=1", login, f.n, f.now().Add(30*time.Minute).Unix())
	f.copilot[token] = login
	json.NewEncoder(w).Encode(map[string]any{"token": token, "expires_at": f.now().Add(30 * time.Minute).Unix(),
		"refresh_in": f.RefreshIn.Load(), "sku": "copilot_pro", "chat_enabled": true,
		"endpoints": map[string]string{"api": f.URL + "/copilot", "proxy": f.URL + "/proxy"}})
}

// checkCopilot says what is wrong with a Copilot API call ("" = nothing): the bearer must be a
// Copilot token of ours not revoked, with the Copilot Chat headers.
func (f *FakeGitHub) checkCopilot(r *http.Request) string {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	login, revoked := f.copilot[tok], f.revoked[tok]
	f.mu.Unlock()
	switch {
	case !ok || login == "":
		return "unknown token"
	case revoked:
		return "token " + tok + " has expired" // echoed, as upstreams do: the gateway must scrub it
	case r.Header.Get("Editor-Version") == "" || r.Header.Get("Editor-Plugin-Version") == "" ||
		r.Header.Get("Copilot-Integration-Id") == "":
		return "missing editor headers"
	}
	return ""
}

// UseFakeGitHub points the copilot.* OAuth settings at the fake, dates its tokens on the
// gateway's clock and adds the provider copilot (type copilot) unless there is one.
func (e *Env) UseFakeGitHub(f *FakeGitHub) {
	e.T.Helper()
	f.Clock = e.Clock
	e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"copilot": map[string]any{
		"device_code_url": f.URL + "/login/device/code", "access_token_url": f.URL + "/login/oauth/access_token",
		"copilot_token_url": f.URL + "/copilot_internal/v2/token", "user_url": f.URL + "/user"}}, 200)
	for _, it := range e.MustAPI("GET", "/api/providers", nil, 200)["items"].([]any) {
		if it.(map[string]any)["name"] == "copilot" {
			return
		}
	}
	e.MustAPI("POST", "/api/providers", map[string]any{"name": "copilot", "type": "copilot"}, 201)
}

// AddCopilotAccount signs a GitHub user in on provider ("" = copilot) through the admin API's
// device flow (start → Approve → poll after the interval) and returns its connection id.
func (e *Env) AddCopilotAccount(f *FakeGitHub, provider, login string, id int64) int64 {
	e.T.Helper()
	start := e.MustAPI("POST", "/api/oauth/copilot/device", map[string]any{"provider": provider}, 200)
	f.Approve(start["user_code"].(string), login, id)
	e.Clock.Advance(time.Duration(start["interval"].(float64)) * time.Second)
	out := map[string]any{}
	st := e.API("POST", "/api/oauth/copilot/device/poll", map[string]any{"flow": start["flow"]}, &out)
	if st != 201 && st != 200 {
		e.T.Fatalf("device poll: %d %v", st, out)
	}
	return int64(out["id"].(float64))
}

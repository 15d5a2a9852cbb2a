package testenv

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The setups and small clients here are shared by the end-to-end packages (e2e, e2e/ops).

// MessagesBody is a minimal messages request for the built-in anthropic provider's test model.
const MessagesBody = `{"model":"anthropic/claude-test","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`

// SetupOne starts a gateway (with the command-line flags args) with one provider "up" and one
// connection to the fake upstream, and a key that already sees up/gpt-test.
func SetupOne(t *testing.T, chat http.HandlerFunc, args ...string) (*Env, *FakeUpstream, string) {
	t.Helper()
	up := NewFakeUpstream(t, chat)
	e := New(t, args...)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-upstream-secret-1", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	return e, up, key
}

// UpConn is one connection of provider "up": its name, its upstream key and its priority.
type UpConn struct {
	Name, Key string
	Priority  int
}

// SetupConns starts a gateway whose provider "up" reaches the fake upstream through conns, and
// a key that already sees up/gpt-test; it returns the connections' ids in the order given.
func SetupConns(t *testing.T, chat http.HandlerFunc, conns ...UpConn) (*Env, *FakeUpstream, string, []int64) {
	t.Helper()
	up := NewFakeUpstream(t, chat)
	e := New(t)
	e.AddProvider("up", up.URL+"/v1")
	ids := make([]int64, len(conns))
	for i, c := range conns {
		ids[i] = e.AddConnection("up", c.Name, c.Key, c.Priority)
	}
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	return e, up, key, ids
}

// TwoKeys starts a gateway with provider "up" and two connections a (priority 0, upstream key
// sk-a) and b (priority 1, sk-b), so a is always tried first.
func TwoKeys(t *testing.T, chat http.HandlerFunc) (*Env, *FakeUpstream, string, int64, int64) {
	t.Helper()
	e, up, key, ids := SetupConns(t, chat, UpConn{Name: "a", Key: "sk-a", Priority: 0}, UpConn{Name: "b", Key: "sk-b", Priority: 1})
	return e, up, key, ids[0], ids[1]
}

// FailingUntilFixed is an upstream that answers 500 until the flag it returns is cleared, and
// then a completion.
func FailingUntilFixed() (*atomic.Bool, http.HandlerFunc) {
	failing := &atomic.Bool{}
	failing.Store(true)
	return failing, func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			Status(500, nil, `{"error":{"message":"internal error"}}`)(w, r)
			return
		}
		JSONAnswer(CompletionJSON)(w, r)
	}
}

// Call makes one request with headers and returns the status, the headers and the body. A
// "Host" header names the host the request asks for, as a client reaching the gateway under
// another name would.
func Call(t *testing.T, c *http.Client, method, u, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, ReadAll(t, resp)
}

// ClientFrom is an HTTP client whose connections start from a given loopback address (all of
// 127.0.0.0/8 reaches the gateway on 127.0.0.1), so a test can be two different clients.
func ClientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// RawFrom opens a connection to the gateway from a loopback address of its own.
func RawFrom(t *testing.T, base, ip string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Login posts the password with extra headers and returns the status (303 = logged in).
func Login(t *testing.T, c *http.Client, base, password string, header map[string]string) int {
	t.Helper()
	st, _ := Fetch(t, c, "POST", base+"/login", url.Values{"password": {password}}, header)
	return st
}

// LimitedKey creates a client key with limits and returns the key and its id.
func LimitedKey(e *Env, name string, limits map[string]any) (string, int64) {
	e.T.Helper()
	body := map[string]any{"name": name}
	for k, v := range limits {
		body[k] = v
	}
	out := e.MustAPI("POST", "/api/keys", body, 201)
	return out["key"].(string), int64(out["id"].(float64))
}

// KeyUse is a key's use against its limits, as the admin API shows it.
func KeyUse(e *Env, id int64) map[string]any {
	e.T.Helper()
	return e.MustAPI("GET", "/api/keys/"+strconv.FormatInt(id, 10)+"/usage", nil, 200)
}

// Refusal reads a 429's limit from its diagnostics (both formats carry them beside the error).
type Refusal struct {
	Error struct {
		Type string `json:"type"`
		Code string `json:"code"`
	} `json:"error"`
	Type        string `json:"type"`
	Diagnostics struct {
		Limit    string    `json:"limit"`
		Budget   string    `json:"budget"`
		Value    float64   `json:"limit_value"`
		ResetsAt time.Time `json:"resets_at"`
	} `json:"diagnostics"`
}

// ReadRefusal reads a key limit's 429 answer; any other status fails the test.
func ReadRefusal(t *testing.T, r *http.Response) Refusal {
	t.Helper()
	body := ReadAll(t, r)
	if r.StatusCode != 429 {
		t.Fatalf("status %d, want 429: %s", r.StatusCode, body)
	}
	var out Refusal
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return out
}

// SetPrice sets an operator price for provider/model (USD per million tokens).
func SetPrice(e *Env, model string, in, out, cacheWrite, cacheRead float64) {
	e.T.Helper()
	e.MustAPI("PATCH", "/api/settings/prices", map[string]any{"models": map[string]any{model: map[string]any{
		"input_per_mtok": in, "output_per_mtok": out, "cache_write_per_mtok": cacheWrite, "cache_read_per_mtok": cacheRead}}}, 200)
}

// Near says whether two amounts of USD are the same up to rounding.
func Near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// LeaseCall posts to the session-leases surface and decodes the answer.
func LeaseCall(t *testing.T, e *Env, path, key string, body any) (int, map[string]any, http.Header) {
	t.Helper()
	b, _ := json.Marshal(body)
	r := e.Post(context.Background(), path, key, string(b), nil)
	raw := ReadAll(t, r)
	var out map[string]any
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("%s: not JSON: %q", path, raw)
	}
	return r.StatusCode, out, r.Header
}

// LeaseKey creates a client key with the lease scope on the given connections and returns the
// key and its id.
func LeaseKey(e *Env, name string, conns ...int64) (string, string) {
	out := e.MustAPI("POST", "/api/keys", map[string]any{"name": name, "scopes": []string{"lease:exclusive"}, "allowed_connections": conns}, 201)
	return out["key"].(string), strconv.FormatInt(int64(out["id"].(float64)), 10)
}

// UsedKeys lists the upstream credential of each chat call from index from on.
func UsedKeys(up *FakeUpstream, from int) []string {
	var out []string
	for _, r := range up.ChatRequests()[from:] {
		out = append(out, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}
	return out
}

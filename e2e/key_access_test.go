package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

// clientGet calls a GET proxy surface with a client key and extra headers.
func clientGet(t *testing.T, e *testenv.Env, path, key string, header map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.Base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := testenv.ChatClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, testenv.ReadAll(t, resp)
}

// adminFields is the admin API's error: its code and per-field messages.
func adminFields(out map[string]any) (string, map[string]any) {
	e, _ := out["error"].(map[string]any)
	code, _ := e["code"].(string)
	fields, _ := e["fields"].(map[string]any)
	return code, fields
}

// A client key's allowed_models, scopes and allowed_connections are set on POST and PATCH
// /api/keys, strictly: every field that fails is named (422), malformed bodies are 400, and a
// refused change changes nothing. GET returns them; they survive a restart.
func TestKeyAccessFieldsOnTheAdminAPI(t *testing.T) {
	e := testenv.New(t)
	e.AddProvider("up", "http://127.0.0.1:1/v1")
	c1 := e.AddConnection("up", "c1", "sk-1", 0)
	c2 := e.AddConnection("up", "c2", "sk-2", 0)

	created := e.MustAPI("POST", "/api/keys", map[string]any{"name": "agent", "allowed_models": []string{"up/*", "resilient-chat", "up/*"},
		"scopes": []string{"lease:exclusive"}, "allowed_connections": []int64{c2, c1}}, 201)
	id := itoa(int64(created["id"].(float64)))
	if created["key"] == nil || !sameJSON(created["allowed_models"], []any{"up/*", "resilient-chat"}) ||
		!sameJSON(created["scopes"], []any{"lease:exclusive"}) || !sameJSON(created["allowed_connections"], []any{float64(c2), float64(c1)}) {
		t.Fatalf("created %v", created)
	}
	plain := e.MustAPI("POST", "/api/keys", map[string]any{"name": "plain"}, 201)
	if !sameJSON(plain["allowed_models"], []any{}) || !sameJSON(plain["scopes"], []any{}) || !sameJSON(plain["allowed_connections"], []any{}) {
		t.Fatalf("a key without lists shows empty lists: %v", plain)
	}

	cases := []struct {
		name   string
		method string
		body   string
		status int
		fields []string
	}{
		{"a bad pattern", "PATCH", `{"allowed_models":["up/*","up/[x"]}`, 422, []string{"allowed_models[1]"}},
		{"an empty pattern", "PATCH", `{"allowed_models":[""]}`, 422, []string{"allowed_models[0]"}},
		{"an unknown scope", "PATCH", `{"scopes":["admin"]}`, 422, []string{"scopes[0]"}},
		{"a connection that does not exist", "PATCH", `{"allowed_connections":[99999]}`, 422, []string{"allowed_connections[0]"}},
		{"the lease scope without connections", "PATCH", `{"allowed_connections":[]}`, 422, []string{"allowed_connections"}},
		{"several at once", "PATCH", `{"name":"","allowed_models":["a["],"scopes":["x"]}`, 422, []string{"name", "allowed_models[0]", "scopes[0]"}},
		{"an unknown field", "PATCH", `{"allowed_model":["x"]}`, 422, nil},
		{"a list as a string", "PATCH", `{"allowed_models":"up/*"}`, 422, nil},
		{"a key twice", "PATCH", `{"scopes":[],"scopes":["lease:exclusive"]}`, 400, nil},
		{"create: the lease scope without connections", "POST", `{"name":"x","scopes":["lease:exclusive"]}`, 422, []string{"allowed_connections"}},
		{"create: a bad pattern", "POST", `{"name":"x","allowed_models":["\\"]}`, 422, []string{"allowed_models[0]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := "/api/keys"
			if c.method == "PATCH" {
				path += "/" + id
			}
			st, out := adminRaw(t, e, c.method, path, c.body)
			if st != c.status {
				t.Fatalf("status %d, want %d: %v", st, c.status, out)
			}
			_, fields := adminFields(out)
			if len(fields) != len(c.fields) {
				t.Fatalf("fields %v, want %v", fields, c.fields)
			}
			for _, f := range c.fields {
				if fields[f] == nil || fields[f] == "" {
					t.Errorf("no message for %s: %v", f, fields)
				}
			}
		})
	}
	got := e.MustAPI("GET", "/api/keys/"+id, nil, 200)
	if !sameJSON(got["allowed_models"], []any{"up/*", "resilient-chat"}) || got["name"] != "agent" || got["key"] != nil {
		t.Fatalf("refused changes changed the key: %v", got)
	}

	// A partial PATCH changes what it names; the rest stays.
	patched := e.MustAPI("PATCH", "/api/keys/"+id, map[string]any{"allowed_models": []string{"up/gpt-*"}, "name": "agent-2"}, 200)
	if !sameJSON(patched["allowed_models"], []any{"up/gpt-*"}) || patched["name"] != "agent-2" ||
		!sameJSON(patched["scopes"], []any{"lease:exclusive"}) || patched["key"] != nil {
		t.Fatalf("patched %v", patched)
	}
	e.MustAPI("PATCH", "/api/keys/"+id, map[string]any{"scopes": []string{}, "allowed_connections": []int64{}}, 200)
	if st := e.API("PATCH", "/api/keys/999999", map[string]any{"name": "x"}, nil); st != 404 {
		t.Fatalf("PATCH of a key that does not exist: %d", st)
	}

	// A deleted connection leaves the lists.
	e.MustAPI("PATCH", "/api/keys/"+id, map[string]any{"scopes": []string{"lease:exclusive"}, "allowed_connections": []int64{c1, c2}}, 200)
	e.MustAPI("DELETE", "/api/connections/"+itoa(c1), nil, 204)
	if got := e.MustAPI("GET", "/api/keys/"+id, nil, 200); !sameJSON(got["allowed_connections"], []any{float64(c2)}) {
		t.Fatalf("after deleting a connection: %v", got["allowed_connections"])
	}

	e.Restart()
	var list struct{ Items []map[string]any }
	e.API("GET", "/api/keys", nil, &list)
	found := false
	for _, k := range list.Items {
		if itoa(int64(k["id"].(float64))) == id {
			found = sameJSON(k["allowed_models"], []any{"up/gpt-*"}) && sameJSON(k["scopes"], []any{"lease:exclusive"}) &&
				sameJSON(k["allowed_connections"], []any{float64(c2)})
		}
	}
	if !found {
		t.Fatalf("after a restart: %v", list.Items)
	}

	e.MustAPI("DELETE", "/api/keys/"+id, nil, 204)
	if st, out := adminRaw(t, e, "PATCH", "/api/keys/"+id, `{"name":"again"}`); st != 409 {
		t.Fatalf("PATCH of a revoked key: %d %v", st, out)
	}
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// upstreamCalls counts the calls an upstream got other than model lists.
func upstreamCalls(reqs []testenv.Recorded) int {
	n := 0
	for _, r := range reqs {
		if !strings.HasSuffix(r.Path, "/models") {
			n++
		}
	}
	return n
}

// A key limited by allowed_models is refused everything else with 403 model_not_allowed in the
// client's own format, before any upstream call, on every surface (count_tokens included),
// whether the model exists, is unknown, or is a bare name; the models it may use are served, by
// provider/model or by a bare name that resolves to one; /v1/models and /v1/models/{id} show only
// those. A change of the list applies to the next request.
func TestModelsOutsideTheKeysAllowListAreRefusedWithoutAnUpstreamCall(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "gpt-test", "gpt-other")
	ant := testenv.NewFakeAnthropic(t, testenv.MessagesAnswer(), "claude-test", "claude-ok")
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-up", 0)
	e.AddProviderOfType("ant", "anthropic", ant.URL)
	e.MustAPI("POST", "/api/connections", map[string]any{"provider": "ant", "name": "main", "auth_type": "api_key", "api_key": "sk-ant-x"}, 201)
	open := e.NewKey()
	e.WaitModels(open, "up/gpt-test")
	e.WaitModels(open, "ant/claude-ok")
	created := e.MustAPI("POST", "/api/keys", map[string]any{"name": "limited", "allowed_models": []string{"up/gpt-test", "ant/claude-ok*"}}, 201)
	key, id := created["key"].(string), itoa(int64(created["id"].(float64)))

	before := upstreamCalls(up.Requests()) + upstreamCalls(ant.Requests())
	refused := []struct {
		name, path, body string
		anthropic        bool
	}{
		{"chat, a listed model of the same provider", "/v1/chat/completions", `{"model":"up/gpt-other","messages":[{"role":"user","content":"hi"}]}`, false},
		{"chat, streaming", "/v1/chat/completions", `{"model":"up/gpt-other","stream":true,"messages":[{"role":"user","content":"hi"}]}`, false},
		{"chat, without /v1", "/chat/completions", `{"model":"ant/claude-test","messages":[{"role":"user","content":"hi"}]}`, false},
		{"chat, a bare name", "/v1/chat/completions", `{"model":"gpt-other","messages":[{"role":"user","content":"hi"}]}`, false},
		{"chat, a model nobody has", "/v1/chat/completions", `{"model":"nobody/nothing","messages":[]}`, false},
		{"chat, an unlisted model of an allowed provider", "/v1/chat/completions", `{"model":"up/gpt-test-2","messages":[]}`, false},
		{"messages", "/v1/messages", `{"model":"ant/claude-test","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, true},
		{"messages toward a translated provider", "/v1/messages", `{"model":"up/gpt-other","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, true},
		{"responses", "/v1/responses", `{"model":"up/gpt-other","input":"hi"}`, false},
		{"count_tokens", "/v1/messages/count_tokens", `{"model":"ant/claude-test","messages":[{"role":"user","content":"hi"}]}`, true},
		{"count_tokens, a bare name", "/v1/messages/count_tokens", `{"model":"claude-test","messages":[{"role":"user","content":"hi"}]}`, true},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			var r *http.Response
			if c.anthropic {
				r = e.PostAnthropic(c.path, key, c.body, nil)
			} else {
				r = e.Post(context.Background(), c.path, key, c.body, nil)
			}
			body := testenv.ReadAll(t, r)
			if r.StatusCode != 403 {
				t.Fatalf("status %d: %s", r.StatusCode, body)
			}
			var doc map[string]any
			json.Unmarshal([]byte(body), &doc)
			errObj, _ := doc["error"].(map[string]any)
			if c.anthropic {
				if doc["type"] != "error" || errObj["type"] != "permission_error" || !strings.Contains(errObj["message"].(string), "allowed models") {
					t.Fatalf("not Anthropic's shape: %s", body)
				}
			} else if errObj["type"] != "permission_error" || errObj["code"] != "model_not_allowed" || errObj["message"] == "" {
				t.Fatalf("not OpenAI's shape: %s", body)
			}
		})
	}
	if after := upstreamCalls(up.Requests()) + upstreamCalls(ant.Requests()); after != before {
		t.Fatalf("refused requests reached an upstream: %d calls before, %d after", before, after)
	}

	// What the key may use is served: by provider/model, by a bare name resolving to it, a glob.
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", testenv.ChatBody},
		{"/v1/chat/completions", `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"ant/claude-ok","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages/count_tokens", `{"model":"ant/claude-ok","messages":[{"role":"user","content":"hi"}]}`},
	} {
		r := e.PostAnthropic(c.path, key, c.body, nil)
		if body := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", c.path, c.body, r.StatusCode, body)
		}
	}

	// The model list shows only what the key may use, in both shapes and without /v1.
	ids := func(path string, header map[string]string) []string {
		st, body := clientGet(t, e, path, key, header)
		if st != 200 {
			t.Fatalf("%s: %d %s", path, st, body)
		}
		var doc struct{ Data []struct{ ID string } }
		json.Unmarshal([]byte(body), &doc)
		var out []string
		for _, d := range doc.Data {
			out = append(out, d.ID)
		}
		return out
	}
	for _, c := range []struct {
		path   string
		header map[string]string
	}{{"/v1/models", nil}, {"/models", nil}, {"/v1/models", map[string]string{"anthropic-version": "2023-06-01"}}} {
		if got := strings.Join(ids(c.path, c.header), ","); got != "ant/claude-ok,up/gpt-test" {
			t.Errorf("%s %v lists %s", c.path, c.header, got)
		}
	}
	if all := e.ListModels(open); len(all) != 4 {
		t.Fatalf("a key without a list sees every model: %v", all)
	}
	if st, body := clientGet(t, e, "/v1/models/up/gpt-other", key, nil); st != 403 || !strings.Contains(body, "model_not_allowed") {
		t.Fatalf("a model outside the list by id: %d %s", st, body)
	}
	if st, body := clientGet(t, e, "/v1/models/up%2Fgpt-test", key, nil); st != 200 || !strings.Contains(body, `"up/gpt-test"`) {
		t.Fatalf("a model on the list by id: %d %s", st, body)
	}

	// The list changes at once: emptied, the key may use everything.
	e.MustAPI("PATCH", "/api/keys/"+id, map[string]any{"allowed_models": []string{}}, 200)
	r := e.Chat(context.Background(), key, `{"model":"up/gpt-other","messages":[{"role":"user","content":"hi"}]}`)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("after emptying the list: %d %s", r.StatusCode, body)
	}
	e.MustAPI("PATCH", "/api/keys/"+id, map[string]any{"allowed_models": []string{"*"}}, 200)
	if got := ids("/v1/models", nil); len(got) != 4 {
		t.Fatalf("* lists everything: %v", got)
	}

	// The refusals are in the request log with their reason, under the key.
	e.Eventually("the refusals are logged", func() bool {
		n := 0
		for _, r := range requestLog(t, e, "?status=403&key="+id) {
			if r.ErrorCode == "model_not_allowed" {
				n++
			}
		}
		return n == len(refused)+1 // and GET /v1/models/up/gpt-other
	})
}

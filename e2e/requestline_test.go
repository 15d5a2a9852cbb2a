package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

// logLine is the gateway's log line whose text contains marker; "" until it is written.
func logLine(e *testenv.Env, marker string) string {
	for _, l := range strings.Split(e.Logs.String(), "\n") {
		if strings.Contains(l, marker) {
			return l
		}
	}
	return ""
}

// TestRequestLine: every request through the real gateway leaves one log line with who, what
// and how it ended, in the configured format: logfmt with every field of a served request (the
// provider, model, connection, attempts and tokens), the error of a refused one quoted as one
// value; in JSON the same fields as one parseable object.
func TestRequestLine(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))

	t.Run("text", func(t *testing.T) {
		e := testenv.New(t)
		e.AddProvider("up", up.URL+"/v1")
		conn := e.AddConnection("up", "main", "sk-up", 0)
		key := e.NewKey()
		e.WaitModels(key, "up/gpt-test")

		r := e.Post(context.Background(), "/v1/chat/completions", key, testenv.ChatBody, map[string]string{"X-Request-Id": "line-served-1"})
		if r.StatusCode != 200 {
			t.Fatalf("status %d", r.StatusCode)
		}
		size := len(testenv.ReadAll(t, r))
		e.Eventually("the served request's line", func() bool { return logLine(e, "request_id=line-served-1 ") != "" })
		served := regexp.MustCompile(`^time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\S+ level=INFO msg=request request_id=line-served-1 ` +
			`method=POST path=/v1/chat/completions status=200 bytes=` + strconv.Itoa(size) + ` duration=[0-9.]+[nµm]?s ` +
			`provider=up model=gpt-test connection_id=` + strconv.FormatInt(conn, 10) + ` attempts=1 stream=false ` +
			`input_tokens=3 output_tokens=2$`)
		if l := logLine(e, "request_id=line-served-1 "); !served.MatchString(l) {
			t.Fatalf("served request's line:\n%s\nwant it to match %s", l, served)
		}

		r = e.Post(context.Background(), "/v1/chat/completions", key, `{"model":"nobody/nope","messages":[]}`,
			map[string]string{"X-Request-Id": "line-refused-1"})
		if r.StatusCode != 404 {
			t.Fatalf("unknown model: status %d", r.StatusCode)
		}
		testenv.ReadAll(t, r)
		e.Eventually("the refused request's line", func() bool { return logLine(e, "request_id=line-refused-1 ") != "" })
		refused := regexp.MustCompile(`^time=\S+ level=INFO msg=request request_id=line-refused-1 method=POST ` +
			`path=/v1/chat/completions status=404 bytes=\d+ duration=\S+ error_code=model_not_found error="[^"]*nobody/nope[^"]*"$`)
		if l := logLine(e, "request_id=line-refused-1 "); !refused.MatchString(l) {
			t.Fatalf("refused request's line:\n%s\nwant it to match %s", l, refused)
		}
	})

	// Requests no route serves in their method are answered by the router itself; the edge still
	// runs for them: they carry their request id, dashboard addresses their security headers, and
	// each leaves its line.
	t.Run("unrouted", func(t *testing.T) {
		e := testenv.New(t)
		key := e.NewKey()
		for _, c := range []struct {
			method, path string
			csp          bool
		}{{"DELETE", "/v1/chat/completions", false}, {"PUT", "/login", true}, {"DELETE", "/metrics", true}} {
			id := "line-unrouted-" + strings.ToLower(c.method) + strings.ReplaceAll(c.path, "/", "-")
			req, _ := http.NewRequest(c.method, e.Base+c.path, strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("X-Request-Id", id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			testenv.ReadAll(t, resp)
			if resp.StatusCode != 404 || resp.Header.Get("X-Request-Id") != id || (resp.Header.Get("Content-Security-Policy") != "") != c.csp {
				t.Fatalf("%s %s: %d, request id %q, CSP %q", c.method, c.path, resp.StatusCode, resp.Header.Get("X-Request-Id"),
					resp.Header.Get("Content-Security-Policy"))
			}
			want := "method=" + c.method + " path=" + c.path + " status=404 "
			e.Eventually("the line of "+c.method+" "+c.path, func() bool { return strings.Contains(logLine(e, "request_id="+id+" method="+c.method), want) })
		}
	})

	t.Run("json", func(t *testing.T) {
		e := testenv.New(t, "--log-format", "json")
		e.AddProvider("up", up.URL+"/v1")
		e.AddConnection("up", "main", "sk-up", 0)
		key := e.NewKey()
		e.WaitModels(key, "up/gpt-test")
		r := e.Post(context.Background(), "/v1/chat/completions", key, testenv.ChatBody, map[string]string{"X-Request-Id": "line-json-1"})
		if r.StatusCode != 200 {
			t.Fatalf("status %d", r.StatusCode)
		}
		testenv.ReadAll(t, r)
		e.Eventually("the request's line", func() bool { return logLine(e, `"request_id":"line-json-1"`) != "" })
		var line map[string]any
		if err := json.Unmarshal([]byte(logLine(e, `"request_id":"line-json-1"`)), &line); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]any{"level": "INFO", "msg": "request", "method": "POST", "path": "/v1/chat/completions",
			"status": 200.0, "provider": "up", "model": "gpt-test", "attempts": 1.0, "stream": false, "input_tokens": 3.0,
			"output_tokens": 2.0} {
			if line[k] != want {
				t.Fatalf("%s = %v, want %v: %v", k, line[k], want, line)
			}
		}
		if d, ok := line["duration"].(float64); !ok || d <= 0 {
			t.Fatalf("duration %v", line["duration"])
		}
	})
}

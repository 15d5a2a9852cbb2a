package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// rawExchange writes requests as bytes on one connection and reads one answer per request.
func rawExchange(t *testing.T, base string, requests ...string) []*http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	var out []*http.Response
	for _, r := range requests {
		if _, err := io.WriteString(conn, r); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("reading the answer to %.60q: %v", r, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		out = append(out, resp)
	}
	return out
}

func bodyOf(r *http.Response) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

// A request net/http refuses while reading its head (an Idempotency-Key with control
// characters) is answered in the caller's format, naming the header, not with net/http's plain
// text; dashboard addresses keep the plain text. Other unusable keys are dropped and logged at
// debug.
func TestMalformedHeadersAreRefusedInTheSurfacesFormat(t *testing.T) {
	e, up, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	post := func(path, badHeader string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + key + "\r\nContent-Type: application/json\r\n" +
			badHeader + "Content-Length: " + itoa(int64(len(testenv.ChatBody))) + "\r\n\r\n" + testenv.ChatBody
	}
	cases := []struct {
		name, request string
		check         func(t *testing.T, body string)
	}{
		{"OpenAI, control character", post("/v1/chat/completions", "Idempotency-Key: ab\x01cd\r\n"), func(t *testing.T, body string) {
			var v struct {
				Error struct{ Message, Type, Code string }
			}
			if json.Unmarshal([]byte(body), &v) != nil || v.Error.Type != "invalid_request_error" || v.Error.Code != "invalid_header" ||
				!strings.Contains(v.Error.Message, "Idempotency-Key") {
				t.Fatalf("not an OpenAI error naming the header: %s", body)
			}
		}},
		{"OpenAI, NUL", post("/v1/chat/completions", "Idempotency-Key: ab\x00cd\r\n"), nil},
		{"OpenAI, DEL", post("/v1/chat/completions", "Idempotency-Key: ab\x7fcd\r\n"), nil},
		{"OpenAI, escape in another header", post("/v1/models", "X-Trace: \x1b[31m\r\n"), func(t *testing.T, body string) {
			if !strings.Contains(body, "X-Trace") {
				t.Fatalf("the header is not named: %s", body)
			}
		}},
		{"Anthropic", post("/v1/messages", "anthropic-version: 2023-06-01\r\nIdempotency-Key: ab\x01cd\r\n"), func(t *testing.T, body string) {
			var v struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if json.Unmarshal([]byte(body), &v) != nil || v.Type != "error" || v.Error.Type != "invalid_request_error" ||
				!strings.Contains(v.Error.Message, "Idempotency-Key") {
				t.Fatalf("not an Anthropic error: %s", body)
			}
		}},
		{"Anthropic without /v1", post("/messages", "anthropic-version: 2023-06-01\r\nIdempotency-Key: ab\x01cd\r\n"), func(t *testing.T, body string) {
			if !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, "Idempotency-Key") {
				t.Fatalf("not an Anthropic error: %s", body)
			}
		}},
		{"OpenAI without /v1", post("/chat/completions", "Idempotency-Key: ab\x01cd\r\n"), func(t *testing.T, body string) {
			if !strings.Contains(body, `"code":"invalid_header"`) || !strings.Contains(body, `"type":"invalid_request_error"`) {
				t.Fatalf("not an OpenAI error: %s", body)
			}
		}},
		{"admin API", "GET /api/providers HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testenv.AdminToken + "\r\nX-Note: a\x02b\r\n\r\n",
			func(t *testing.T, body string) {
				var v struct {
					Error struct{ Message, Code string }
				}
				if json.Unmarshal([]byte(body), &v) != nil || v.Error.Code != "invalid_header" || !strings.Contains(v.Error.Message, "X-Note") {
					t.Fatalf("not an admin error: %s", body)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := rawExchange(t, e.Base, c.request)[0]
			body := bodyOf(resp)
			if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Request-Id") == "" {
				t.Fatalf("%d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if c.check != nil {
				c.check(t, body)
			}
		})
	}

	// After a good request on the same connection, the refusal still knows its own request.
	rs := rawExchange(t, e.Base, "GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", post("/v1/chat/completions", "Idempotency-Key: \x01\r\n"))
	if rs[0].StatusCode != 200 || rs[1].StatusCode != 400 || !strings.Contains(bodyOf(rs[1]), `"type":"invalid_request_error"`) {
		t.Fatalf("keep-alive: %d then %d", rs[0].StatusCode, rs[1].StatusCode)
	}
	// Dashboard addresses keep net/http's plain text.
	if r := rawExchange(t, e.Base, "GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: a\x02b\r\n\r\n")[0]; r.StatusCode != 400 ||
		!strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("dashboard: %d %q", r.StatusCode, r.Header.Get("Content-Type"))
	}

	// A key net/http lets through but the engine will not forward (too long, spaces, tabs,
	// non-ASCII) is dropped: the request succeeds, the upstream sees no key, the log says so at
	// debug without the key.
	for _, bad := range []string{strings.Repeat("k", 256), "has space", "tab\there", "nicht-ascii-ä"} {
		resp := e.Post(t.Context(), "/v1/chat/completions", key, testenv.ChatBody, map[string]string{"Idempotency-Key": bad})
		if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("key %q: %d %s", bad, resp.StatusCode, body)
		}
		reqs := up.ChatRequests()
		if got := reqs[len(reqs)-1].Header.Get("Idempotency-Key"); got != "" {
			t.Fatalf("key %q forwarded as %q", bad, got)
		}
		if !strings.Contains(e.Logs.String(), "idempotency key ignored") || strings.Contains(e.Logs.String(), bad) {
			t.Fatalf("key %q: no debug line, or the line shows the key", bad)
		}
	}
}

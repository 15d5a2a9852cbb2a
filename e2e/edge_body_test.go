package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// A client past its login budget is answered at once, before its body is read: a login that
// declares a body and never sends it gets its 429 without waiting for the read timeout, and the
// page it came for survives in the form's address.
func TestLoginThrottleAnswersBeforeReadingTheBody(t *testing.T) {
	e := testenv.New(t)
	c := testenv.ClientFrom(t, "127.0.4.1")
	for i := range 5 {
		if st := testenv.Login(t, c, e.Base, "guess", nil); st != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i, st)
		}
	}
	conn := testenv.RawFrom(t, e.Base, "127.0.4.1")
	start := time.Now()
	io.WriteString(conn, "POST /login?next=%2Fkeys HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
		"Content-Length: 4000\r\n\r\n") // and no body
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	body := testenv.ReadAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || time.Since(start) > 3*time.Second {
		t.Fatalf("%d after %v, Retry-After %q", resp.StatusCode, time.Since(start), resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(body, `action="/login?next=%2Fkeys"`) || !strings.Contains(body, `name="next" value="/keys"`) {
		t.Fatalf("the page to go back to is lost: %s", testenv.Between(body, "<form", ">"))
	}
	// The page keeps it through a successful login too, once the budget is back.
	e.Clock.Advance(time.Minute)
	req, _ := http.NewRequest("POST", e.Base+"/login?next=%2Fkeys", strings.NewReader(url.Values{"password": {testenv.Password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/keys" {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// A hundred anonymous clients, each from its own address (so the throttle lets every one
// through), send login bodies that are too large, declared too large, or slow: the gateway reads
// at most the login form's 8 KiB of each, so its live heap stays within a small bound while they
// are all in flight (it used to read up to 10 MiB of form each).
func TestAnonymousLoginBodiesDoNotGrowTheHeap(t *testing.T) {
	e := testenv.New(t)
	const clients = 100
	big := "password=" + strings.Repeat("a", 256<<10)
	warm := testenv.RawFrom(t, e.Base, "127.0.5.250") // warm the pools up
	io.WriteString(warm, "GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(warm), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("login page: %v", err)
	}
	before := liveHeap()
	statuses := make([]int, clients)
	var wg sync.WaitGroup
	for i := range clients {
		conn := testenv.RawFrom(t, e.Base, fmt.Sprintf("127.0.5.%d", i+1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			head := "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
			conn.SetDeadline(time.Now().Add(3 * time.Second))
			switch i % 3 {
			case 0: // chunked, 256 KiB and never finished
				io.WriteString(conn, head+"Transfer-Encoding: chunked\r\n\r\n"+fmt.Sprintf("%x\r\n%s\r\n", len(big), big))
			case 1: // declared 10 MiB, 256 KiB sent
				io.WriteString(conn, head+"Content-Length: 10485760\r\n\r\n"+big)
			case 2: // slow: a little, then nothing
				io.WriteString(conn, head+"Content-Length: 6000\r\n\r\npassword=abc")
				return
			}
			if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
				statuses[i] = resp.StatusCode
			}
		}()
	}
	wg.Wait()
	after := liveHeap()
	for i, st := range statuses {
		if i%3 != 2 && st != http.StatusRequestEntityTooLarge {
			t.Errorf("client %d: status %d, want 413", i, st)
		}
	}
	const bound = 8 << 20
	if after > before+bound {
		t.Fatalf("live heap grew from %d to %d bytes with %d login bodies in flight", before, after, clients)
	}
	t.Logf("live heap %d → %d bytes", before, after)
}

// Bodies past the edge's limits get 413 in the caller's format: admin JSON on /api, the HTML
// error page on the dashboard and the login. Authenticated proxy calls are not held to them.
func TestBodyLimitsOutsideTheProxy(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	twoMiB := strings.Repeat("x", 2<<20)

	send := func(c *http.Client, method, path, ctype string, body io.Reader, length int64, header map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, e.Base+path, body)
		req.ContentLength = length
		req.Header.Set("Content-Type", ctype)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, testenv.ReadAll(t, resp)
	}
	admin := map[string]string{"Authorization": "Bearer " + testenv.AdminToken}
	adminJSON := `{"name":"` + twoMiB + `","type":"openai","base_url":"http://a/v1"}`
	for _, length := range []int64{int64(len(adminJSON)), -1} { // declared, and chunked
		resp, body := send(http.DefaultClient, "POST", "/api/providers", "application/json", strings.NewReader(adminJSON), length, admin)
		if resp.StatusCode != 413 || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(body, `"code":"too_large"`) {
			t.Fatalf("admin API, length %d: %d %s", length, resp.StatusCode, body[:min(len(body), 200)])
		}
	}
	dash := e.Login()
	form := url.Values{"name": {twoMiB}}.Encode()
	for _, length := range []int64{int64(len(form)), -1} {
		resp, body := send(dash, "POST", "/keys", "application/x-www-form-urlencoded", strings.NewReader(form), length, nil)
		if resp.StatusCode != 413 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(body, "1024 KiB") {
			t.Fatalf("dashboard form, length %d: %d %s", length, resp.StatusCode, body[:min(len(body), 200)])
		}
	}
	loginForm := url.Values{"password": {strings.Repeat("p", 9<<10)}}.Encode()
	resp, body := send(testenv.NoRedirect(), "POST", "/login", "application/x-www-form-urlencoded", strings.NewReader(loginForm), -1, nil)
	if resp.StatusCode != 413 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "8 KiB") {
		t.Fatalf("login: %d %s", resp.StatusCode, body[:min(len(body), 200)])
	}
	// Nothing the cap refused was created.
	if out := e.MustAPI("GET", "/api/keys", nil, 200); len(out["items"].([]any)) != 1 {
		t.Fatalf("keys after the refusals: %v", out["items"])
	}

	// A proxy call with a valid key may send more than the edge's 1 MiB (up to --max-body-mib).
	chat := `{"model":"up/gpt-test","messages":[{"role":"user","content":"` + strings.Repeat("y", 3<<20) + `"}]}`
	r := e.Post(context.Background(), "/v1/chat/completions", key, chat, nil)
	if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("3 MiB proxy call: %d %s", r.StatusCode, b)
	}
	// Without a valid key it is refused for the key, its body unread.
	r = e.Post(context.Background(), "/v1/chat/completions", "sk-sy-wrong", chat, nil)
	if b := testenv.ReadAll(t, r); r.StatusCode != 401 {
		t.Fatalf("3 MiB proxy call with a wrong key: %d %s", r.StatusCode, b)
	}
}

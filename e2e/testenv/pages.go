package testenv

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"switchyard/i18n"
)

// ChatBody is a chat completions request for provider "up" and its model gpt-test.
const ChatBody = `{"model":"up/gpt-test","messages":[{"role":"user","content":"hi"}]}`

// Fetch makes a request (a form post when form is given) and returns the status and body.
func Fetch(t testing.TB, c *http.Client, method, u string, form url.Values, header map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(form.Encode()))
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Between returns the text of s between the first start and the following end, "" if none.
func Between(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	v, _, ok := strings.Cut(after, end)
	if !ok {
		return ""
	}
	return v
}

// Esc is how a catalog text appears in the rendered HTML.
func Esc(l i18n.Lang, key string) string { return html.EscapeString(i18n.TL(l, key)) }

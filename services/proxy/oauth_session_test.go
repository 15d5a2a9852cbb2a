package proxy

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/jonboulle/clockwork"

	"switchyard/services/catalog"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// A session goes upstream as it came on the account it is bound to; another account sees ids
// of its own in the header and in metadata.user_id (only those bytes change), the same on every
// request of the session, and distinct from a third account's.
func TestSessionIDs(t *testing.T) {
	const sess = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"
	key := []byte("k")
	tests := []struct {
		name   string
		header string // X-Claude-Code-Session-Id
		body   string
		inner  string // the session id inside metadata.user_id, "" when none
		want   string // the body another account gets, {D} for its id
	}{
		{"header and JSON user id", sess,
			`{"model":"m","metadata":{"user_id":"{\"device_id\":\"d0d0\",\"account_uuid\":\"\",\"session_id\":\"` + sess + `\"}"},"messages":[]}`, sess,
			`{"model":"m","metadata":{"user_id":"{\"device_id\":\"d0d0\",\"account_uuid\":\"\",\"session_id\":\"{D}\"}"},"messages":[]}`},
		{"header and older user id", sess,
			`{"model":"m",  "metadata":{"user_id":"user_abc_account__session_` + sess + `"},"messages":[]}` + "\n", sess,
			`{"model":"m",  "metadata":{"user_id":"user_abc_account__session_{D}"},"messages":[]}` + "\n"},
		{"user id only", "", `{"metadata":{"user_id":"{\"session_id\":\"` + sess + `\"}"}}`, sess,
			`{"metadata":{"user_id":"{\"session_id\":\"{D}\"}"}}`},
		{"header only", sess, `{"model":"m","messages":[]}`, "", `{"model":"m","messages":[]}`},
		// The id is escaped in the user id and appears unescaped elsewhere: only the session id
		// changes.
		{"an escaped session id", "", `{"metadata":{"user_id":"{\"device_id\":\"abcd\",\"session_id\":\"ab\\u0063d\"}"}}`, "abcd",
			`{"metadata":{"user_id":"{\"device_id\":\"abcd\",\"session_id\":\"{D}\"}"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Options{Clock: clockwork.NewFakeClock(), SessionKey: key})
			send := func(conn *catalog.ConnEntry) (string, string) {
				h := http.Header{"User-Agent": {"claude-cli/2.1.300 (external, cli)"}}
				if tc.header != "" {
					h.Set(sessionHeader, tc.header)
				}
				body := e.sessionIDs(h, []byte(tc.body), conn)
				return h.Get(sessionHeader), string(body)
			}
			ada, bob, cy := account(1, "uuid-ada", ""), account(2, "uuid-bob", ""), account(3, "uuid-cy", "")

			if h, body := send(ada); h != tc.header || body != tc.body {
				t.Fatalf("the bound account got %q\n%s", h, body)
			}
			h, body := send(bob)
			if tc.header != "" {
				if want := derivedSessionID(key, "uuid-bob", tc.header); h != want || !uuidRE.MatchString(h) || h == tc.header {
					t.Fatalf("header %q, want %q", h, want)
				}
			}
			if tc.inner != "" {
				derived := derivedSessionID(key, "uuid-bob", tc.inner)
				if !uuidRE.MatchString(derived) {
					t.Fatalf("derived id %q", derived)
				}
				if want := strings.ReplaceAll(tc.want, "{D}", derived); body != want {
					t.Fatalf("body\n got %s\nwant %s", body, want)
				}
			} else if body != tc.body {
				t.Fatalf("body changed without a session id in it: %s", body)
			}
			if h2, body2 := send(bob); h2 != h || body2 != body {
				t.Fatal("the derived ids changed between requests")
			}
			h3, body3 := send(cy)
			if tc.header != "" && (h3 == h || h3 == tc.header) || tc.inner != "" && (body3 == body || body3 == tc.body) {
				t.Fatalf("two accounts share session ids: %q %s", h3, body3)
			}
			if h, body := send(ada); h != tc.header || body != tc.body {
				t.Fatal("the bound account no longer gets the original ids")
			}
		})
	}
}

// Without a session id a passthrough call is left as it came, and nothing is bound.
func TestSessionIDsWithoutSession(t *testing.T) {
	e := New(Options{Clock: clockwork.NewFakeClock()})
	for _, body := range []string{`{"model":"m","messages":[]}`, `{"model":"m","metadata":{"user_id":"someone"}}`,
		`{"model":"m","metadata":{"user_id":"{\"device_id\":\"d\"}"}}`, `{"model":"m","metadata":{"user_id":7}}`} {
		h := http.Header{}
		if out := e.sessionIDs(h, []byte(body), account(1, "uuid-ada", "")); string(out) != body || len(h) != 0 {
			t.Fatalf("%s → %s %v", body, out, h)
		}
	}
	if n := e.opt.SessionBinds.Len(); n != 0 {
		t.Fatalf("%d bindings", n)
	}
}

package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"switchyard/db/dbtest"
	"testing"
	"time"

	"github.com/gorilla/securecookie"

	"switchyard/db"
	"switchyard/services/sessions"
)

func newTestStore(t *testing.T, key string) (*serverStore, *db.DB) {
	t.Helper()
	d := dbtest.Open(t)
	svc, _, err := sessions.New(context.Background(), d, db.KV{DB: d}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return newServerStore(svc, []byte(strings.Repeat(key, 32)[:32])), d
}

// requestWith is a request carrying the session cookie value (none when "").
func requestWith(value string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	if value != "" {
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: value})
	}
	return r
}

// The store keeps a session as a server row behind a signed cookie: the cookie's signed value is
// the random id, the database has only its SHA-256, a Save with MaxAge < 0 ends the row, and
// anything the store did not sign (a bare id as cookies held before, a forged or altered value,
// a cookie of another instance) opens no session.
func TestServerStore(t *testing.T) {
	ctx := context.Background()
	st, d := newTestStore(t, "k")

	sess, err := st.New(requestWith(""), sessionCookie)
	if err != nil || !sess.IsNew || liveOf(sess) != nil {
		t.Fatalf("no cookie: %+v %v", sess, err)
	}
	sess.Options.MaxAge = 3600
	w := httptest.NewRecorder()
	if err := sess.Save(requestWith(""), w); err != nil {
		t.Fatal(err)
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != sessionCookie || cookies[0].MaxAge != 3600 || !cookies[0].HttpOnly ||
		cookies[0].SameSite != http.SameSiteLaxMode || cookies[0].Path != "/" {
		t.Fatalf("cookie %+v", cookies)
	}
	value := cookies[0].Value
	var id []byte
	codec := securecookie.New([]byte(strings.Repeat("k", 32)), nil).SetSerializer(securecookie.NopEncoder{})
	if err := codec.Decode(sessionCookie, value, &id); err != nil || string(id) != sess.ID || len(id) != 43 {
		t.Fatalf("the cookie does not carry the signed id: %q %v", id, err)
	}
	if _, err := db.GetSession(ctx, d.R, sessions.HashID(string(id))); err != nil {
		t.Fatalf("no row under the id's hash: %v", err)
	}
	if _, err := db.GetSession(ctx, d.R, string(id)); err == nil {
		t.Fatal("the database knows the id itself")
	}

	again, err := st.New(requestWith(value), sessionCookie)
	if err != nil || again.IsNew || again.ID != sess.ID || liveOf(again) == nil ||
		liveOf(again).IDHash != sessions.HashID(sess.ID) {
		t.Fatalf("the cookie does not open its session: %+v %v", again, err)
	}

	other, _ := newTestStore(t, "o")
	ow := httptest.NewRecorder()
	foreign, _ := other.New(requestWith(""), sessionCookie)
	if err := foreign.Save(requestWith(""), ow); err != nil {
		t.Fatal(err)
	}
	altered := []byte(value)
	altered[len(altered)/2] ^= 1
	for name, v := range map[string]string{
		"the bare id (a cookie from before)": sess.ID,
		"an altered signature":               value[:len(value)-2] + "AA",
		"an altered value":                   string(altered),
		"another instance's cookie":          ow.Result().Cookies()[0].Value,
		"junk":                               "x",
	} {
		if s, err := st.New(requestWith(v), sessionCookie); err != nil || !s.IsNew || liveOf(s) != nil || s.ID != "" {
			t.Errorf("%s opened a session: %+v %v", name, s, err)
		}
	}

	again.Options.MaxAge = -1
	w = httptest.NewRecorder()
	if err := again.Save(requestWith(value), w); err != nil {
		t.Fatal(err)
	}
	if c := w.Result().Cookies(); len(c) != 1 || c[0].MaxAge >= 0 || c[0].Value != "" {
		t.Fatalf("logout cookie %+v", c)
	}
	if _, err := db.GetSession(ctx, d.R, sessions.HashID(sess.ID)); err != db.ErrNotFound {
		t.Fatalf("the row survived a Save with MaxAge < 0: %v", err)
	}
	if s, _ := st.New(requestWith(value), sessionCookie); liveOf(s) != nil {
		t.Fatal("the cookie opens an ended session")
	}
}

// Get returns the same session for every call of one request (gorilla's registry), so a request
// looks its session up once.
func TestServerStoreGetIsOncePerRequest(t *testing.T) {
	st, _ := newTestStore(t, "k")
	r := requestWith("")
	a, _ := st.Get(r, sessionCookie)
	b, _ := st.Get(r, sessionCookie)
	if a != b {
		t.Fatal("two Gets of one request returned two sessions")
	}
}

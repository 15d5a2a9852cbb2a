package web

import (
	"net/http"

	"github.com/gorilla/securecookie"
	gsessions "github.com/gorilla/sessions"

	"switchyard/services/sessions"
)

// serverStore is the dashboard's gorilla/sessions Store. A session lives on the server, as a row
// of the sessions table (services/sessions: the SHA-256 of a random id, when it began and was
// last used, its one-time messages); the cookie carries only that random id, encoded and signed
// by securecookie under a key derived from the instance secret. So ending the row ends the
// session at once wherever its cookie went, and a cookie the gateway did not sign costs no
// database read.
//
// A session's Values are not persisted: the dashboard keeps nothing in them, and its one-time
// messages go through the sessions service, which appends and takes them atomically. New puts
// the live server session in Values under liveKey, for this request only.
type serverStore struct {
	svc   *sessions.Service
	codec *securecookie.SecureCookie
	// options are a new session's cookie options; the edge sets MaxAge and Secure before a
	// Save.
	options gsessions.Options
}

var _ gsessions.Store = (*serverStore)(nil)

// liveKey is the Values key under which New leaves the live server session.
type liveKey struct{}

// newServerStore builds the store; hashKey signs the cookies (32 bytes or more).
func newServerStore(svc *sessions.Service, hashKey []byte) *serverStore {
	codec := securecookie.New(hashKey, nil).SetSerializer(securecookie.NopEncoder{})
	// The lifetimes are the server row's (they change at runtime and apply at once); the
	// cookie's own signed timestamp is not judged.
	codec.MaxAge(0)
	return &serverStore{svc: svc, codec: codec,
		options: gsessions.Options{Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode}}
}

// Get returns the request's session, looked up once per request (gorilla's registry).
func (s *serverStore) Get(r *http.Request, name string) (*gsessions.Session, error) {
	return gsessions.GetRegistry(r).Get(s, name)
}

// New returns the session the request's cookie names when it is live: signed by this gateway,
// and its row present and within its lifetimes (the use is recorded). Otherwise it returns a new,
// empty session (IsNew): no cookie, a cookie signed elsewhere or before the cookie was signed,
// an ended or expired session. The error is the database's only.
func (s *serverStore) New(r *http.Request, name string) (*gsessions.Session, error) {
	sess := s.fresh(name)
	ck, err := r.Cookie(name)
	if err != nil {
		return sess, nil
	}
	var id []byte
	if err := s.codec.Decode(name, ck.Value, &id); err != nil {
		return sess, nil
	}
	live, err := s.svc.Lookup(r.Context(), string(id))
	if err != nil || live == nil {
		return sess, err
	}
	sess.ID, sess.IsNew = string(id), false
	sess.Values[liveKey{}] = live
	return sess, nil
}

// fresh is a new session without a server row yet.
func (s *serverStore) fresh(name string) *gsessions.Session {
	sess := gsessions.NewSession(s, name)
	opts := s.options
	sess.Options, sess.IsNew = &opts, true
	return sess
}

// Save writes the session's cookie. A session without an id gets its server row first (a
// login). With MaxAge < 0 the server row ends (logout) and the cookie is dropped.
func (s *serverStore) Save(r *http.Request, w http.ResponseWriter, sess *gsessions.Session) error {
	ctx := r.Context()
	if sess.Options.MaxAge < 0 {
		if sess.ID != "" {
			if err := s.svc.End(ctx, sessions.HashID(sess.ID)); err != nil {
				return err
			}
		}
		sess.ID = ""
		delete(sess.Values, liveKey{})
		http.SetCookie(w, gsessions.NewCookie(sess.Name(), "", sess.Options))
		return nil
	}
	if sess.ID == "" {
		id, err := s.svc.Create(ctx)
		if err != nil {
			return err
		}
		sess.ID = id
	}
	value, err := s.codec.Encode(sess.Name(), []byte(sess.ID))
	if err != nil {
		return err
	}
	http.SetCookie(w, gsessions.NewCookie(sess.Name(), value, sess.Options))
	return nil
}

// liveOf is the live server session New found for sess, nil when none.
func liveOf(sess *gsessions.Session) *sessions.Session {
	if sess == nil {
		return nil
	}
	live, _ := sess.Values[liveKey{}].(*sessions.Session)
	return live
}

package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/oauth"
	"switchyard/views"
)

// fakeSignIns answers the device polls of the account cards with a scripted result and notes
// what it was asked.
type fakeSignIns struct {
	poll        oauth.DevicePoll
	err         error
	flow, owner string
}

func (f *fakeSignIns) StartCodex(string, string) (oauth.SignIn, error) { return oauth.SignIn{}, nil }
func (f *fakeSignIns) CompleteCodex(context.Context, string) (catalog.Connection, bool, error) {
	return catalog.Connection{}, false, nil
}
func (f *fakeSignIns) StartCodexDevice(context.Context, string, string, string) (oauth.DeviceFlow, error) {
	return oauth.DeviceFlow{}, nil
}
func (f *fakeSignIns) PollCodexDevice(_ context.Context, flow, owner string) (oauth.DevicePoll, error) {
	f.flow, f.owner = flow, owner
	return f.poll, f.err
}
func (f *fakeSignIns) StartCopilotDevice(context.Context, string, string, string) (oauth.DeviceFlow, error) {
	return oauth.DeviceFlow{}, nil
}
func (f *fakeSignIns) PollCopilotDevice(ctx context.Context, flow, owner string) (oauth.DevicePoll, error) {
	return f.PollCodexDevice(ctx, flow, owner)
}
func (f *fakeSignIns) PendingOf(string, string) (oauth.SignIn, bool) { return oauth.SignIn{}, false }
func (f *fakeSignIns) Flow(string, string, string) (oauth.DeviceFlow, bool) {
	return oauth.DeviceFlow{}, false
}

// flashes keeps the one-time messages a handler adds.
type flashes struct{ got []views.Flash }

func (s *flashes) IsAdmin(echo.Context) bool                    { return true }
func (s *flashes) Login(echo.Context) error                     { return nil }
func (s *flashes) Logout(echo.Context) error                    { return nil }
func (s *flashes) LogoutEverywhere(echo.Context) (int64, error) { return 0, nil }
func (s *flashes) TakeFlashes(echo.Context) []views.Flash       { return nil }
func (s *flashes) AddFlash(_ echo.Context, kind, text string) error {
	s.got = append(s.got, views.Flash{Kind: kind, Text: text})
	return nil
}

// TestDevicePollWithHTMX is the card's status region as htmx polls it: while the sign-in waits
// it comes back polling at the interval the service asks for (for the operator's own flow);
// once approved the page is sent to the account's row with a message that says whether the
// account is new; a sign-in that ended comes back with why, no longer polling (422, which htmx
// swaps); an internal failure is left to the error handler.
func TestDevicePollWithHTMX(t *testing.T) {
	poll := func(t *testing.T, svc *fakeSignIns, kind string) (*httptest.ResponseRecorder, *flashes, error) {
		t.Helper()
		form := url.Values{"flow": {"flow-7"}, "provider": {kind}, "name": {"team"}}
		req := httptest.NewRequest(http.MethodPost, "/oauth/"+kind+"/device/poll", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("HX-Request", "true")
		req = req.WithContext(i18n.WithLang(req.Context(), i18n.EN))
		rec := httptest.NewRecorder()
		c := echo.New().NewContext(req, rec)
		SetOperator(c, "session:abc")
		fl := &flashes{}
		d := &Dashboard{Accounts: svc, Sessions: fl}
		h := d.PollCodexDevice
		if kind == catalog.TypeCopilot {
			h = d.PollCopilotDevice
		}
		return rec, fl, h(c)
	}

	t.Run("pending", func(t *testing.T) {
		svc := &fakeSignIns{poll: oauth.DevicePoll{Pending: true, Interval: 6500 * time.Millisecond}}
		rec, fl, err := poll(t, svc, catalog.TypeCodex)
		if err != nil || rec.Code != http.StatusOK {
			t.Fatalf("status %d, %v", rec.Code, err)
		}
		body := rec.Body.String()
		for _, want := range []string{`id="codex-device-status"`, `hx-post="/oauth/codex/device/poll"`, `hx-trigger="every 7s, submit"`,
			`name="flow" value="flow-7"`, `name="name" value="team"`} {
			if !strings.Contains(body, want) {
				t.Errorf("missing %s in %s", want, body)
			}
		}
		if svc.flow != "flow-7" || svc.owner != "session:abc" {
			t.Errorf("polled flow %q for %q", svc.flow, svc.owner)
		}
		if len(fl.got) != 0 {
			t.Errorf("flashes %v", fl.got)
		}
	})

	for _, tc := range []struct {
		kind    string
		created bool
		key     string
	}{{catalog.TypeCodex, true, "codex.added"}, {catalog.TypeCopilot, false, "copilot.updated"}} {
		t.Run("approved "+tc.key, func(t *testing.T) {
			conn := catalog.Connection{ID: 12, Name: tc.kind + "-1", Provider: tc.kind}
			rec, fl, err := poll(t, &fakeSignIns{poll: oauth.DevicePoll{Conn: conn, Created: tc.created}}, tc.kind)
			if err != nil || rec.Code != http.StatusNoContent || rec.Header().Get("HX-Redirect") != "/providers#conn-12" {
				t.Fatalf("status %d, HX-Redirect %q, %v", rec.Code, rec.Header().Get("HX-Redirect"), err)
			}
			want := views.Flash{Kind: "success", Text: i18n.TL(i18n.EN, tc.key, conn.Name, conn.Provider)}
			if len(fl.got) != 1 || fl.got[0] != want {
				t.Errorf("flashes %v, want %v", fl.got, want)
			}
		})
	}

	t.Run("ended", func(t *testing.T) {
		rec, fl, err := poll(t, &fakeSignIns{err: errs.New(errs.NotFound, "oauth.flow_unknown")}, catalog.TypeCopilot)
		if err != nil || rec.Code != http.StatusUnprocessableEntity {
			t.Fatalf("status %d, %v", rec.Code, err)
		}
		body := rec.Body.String()
		if !strings.Contains(body, i18n.TL(i18n.EN, "oauth.flow_unknown")) || strings.Contains(body, "hx-post") ||
			strings.Contains(body, `name="flow"`) || !strings.Contains(body, `formaction="/oauth/copilot/device#add-copilot"`) ||
			!strings.Contains(body, `name="provider" value="copilot"`) {
			t.Errorf("ended region %s", body)
		}
		if len(fl.got) != 0 {
			t.Errorf("flashes %v", fl.got)
		}
	})

	t.Run("internal", func(t *testing.T) {
		broken := errors.New("database is locked")
		rec, _, err := poll(t, &fakeSignIns{err: broken}, catalog.TypeCodex)
		if !errors.Is(err, broken) || rec.Body.Len() != 0 {
			t.Fatalf("err %v, body %q", err, rec.Body.String())
		}
	})
}

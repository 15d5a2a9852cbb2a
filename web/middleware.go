package web

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/i18n"
	"switchyard/services/auth"
	"switchyard/services/clientkeys"
	"switchyard/services/errs"
	"switchyard/services/metrics"
	"switchyard/services/proxy"
)

// recoverer turns a panic into a 500 in the right format and a log line; the process goes on.
// http.ErrAbortHandler is re-raised: it is how a handler aborts a response on purpose.
func recoverer(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			defer func() {
				if p := recover(); p != nil {
					if p == http.ErrAbortHandler {
						panic(p)
					}
					log.Error("panic in handler", "request_id", requestIDOf(c), "path", c.Request().URL.Path, "panic", fmt.Sprint(p))
					err = errs.Internalf("panic: %v", p)
				}
			}()
			return next(c)
		}
	}
}

// requestID gives every request an id, echoed in X-Request-Id (a sane client-sent one is kept).
func requestID() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			id := c.Request().Header.Get(echo.HeaderXRequestID)
			if id == "" || len(id) > 64 || !proxy.ValidIdempotencyKey(id) {
				id = newRequestID()
			}
			setRequestID(c, id)
			c.Response().Header().Set(echo.HeaderXRequestID, id)
			return next(c)
		}
	}
}

// newRequestID is a request id of 16 characters: 12 bytes from the runtime's per-thread ChaCha8
// generator, base64url. An id names a request in logs and answers and guards nothing, so it
// needs uniqueness (96 random bits), not the operating system's randomness, which cost a
// microsecond or more a request under load.
func newRequestID() string {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// requestLog renders a returned error through the error handler and writes one structured line
// per request, carrying the error when there was one; never headers or bodies.
func requestLog(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			if err := next(c); err != nil {
				c.Error(err)
			}
			logRequest(log, c, start)
			return nil
		}
	}
}

// logRequest writes requestLog's line. It is a function of its own, never inlined, so that its
// locals (the line) are not part of the middleware's stack frame, which stays on the stack
// under the handler for as long as a stream is open: deep frames there grow every stream's
// goroutine stack (see docs/bench/README.md, "Memory per open stream").
//
//go:noinline
func logRequest(log *slog.Logger, c echo.Context, start time.Time) {
	r := c.Request()
	if r.URL.Path == "/health" || strings.HasPrefix(r.URL.Path, "/static/") {
		return
	}
	now := time.Now()
	l := requestLine{Level: slog.LevelInfo, RequestID: requestIDOf(c), Method: r.Method, Path: r.URL.Path,
		Status: c.Response().Status, Bytes: c.Response().Size, Duration: now.Sub(start)}
	if tr := handlers.TraceOf(c); tr != nil {
		l.ErrorCode = tr.ErrorCode
		if tr.Provider != "" {
			l.Upstream, l.Provider, l.Model, l.ConnectionID, l.Attempts = true, tr.Provider, tr.Model, tr.ConnectionID, tr.Attempts
			l.Stream, l.Complete, l.TTFT = tr.Stream, tr.Complete, tr.TTFT
			l.Tokens, l.InputTokens, l.OutputTokens = tr.InputTokens+tr.OutputTokens > 0, tr.InputTokens, tr.OutputTokens
		}
	}
	if e := requestErrorOf(c); e != nil {
		l.HasError, l.Error = true, e.Render(handlers.English)
		if e.Code == errs.Internal {
			l.Level = slog.LevelError
		}
	}
	logLine(log, r.Context(), &l, now)
}

// trace gives every proxy request the trace the engine fills in and the request log reads.
func trace() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			handlers.SetTrace(c, &proxy.Trace{})
			return next(c)
		}
	}
}

// observe records every proxy request in the metrics, labelled by the route and the trace.
func observe(m *metrics.Metrics, route string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err) // rendered now, so the status below is the one sent
			}
			observed(m, route, c, start)
			return nil
		}
	}
}

// observed records a finished request for observe; never inlined, like logRequest.
//
//go:noinline
func observed(m *metrics.Metrics, route string, c echo.Context, start time.Time) {
	provider, model := "", ""
	if tr := handlers.TraceOf(c); tr != nil {
		provider, model = tr.Provider, tr.MetricModel
	}
	m.Request(route, c.Response().Status, provider, model, time.Since(start))
}

// metricsAuth protects /metrics: with the admin token when one is set (or an admin session);
// without one, only loopback clients (and admin sessions) may read it, so a gateway listening on
// a public address does not show its traffic to the world.
func metricsAuth(a *auth.Service, s *Sessions) echo.MiddlewareFunc {
	return adminOr(a, s, func(c echo.Context) (bool, error) {
		if a.TokenEnabled() {
			return false, nil
		}
		if isLoopback(c.RealIP()) {
			return true, nil
		}
		return false, errs.New(errs.Forbidden, "err.metrics_loopback")
	})
}

// adminCredentials checks a request's admin bearer token (when one is configured), else its
// session. A token that does not check out spends the client's budget of failed checks; while
// that budget is spent the token is not checked at all and wait says for how long (a session
// still passes).
func adminCredentials(c echo.Context, a *auth.Service, s *Sessions) (ok bool, wait time.Duration) {
	r := c.Request()
	if tok, sent := bearer(r); sent && a.TokenEnabled() {
		client := c.RealIP()
		if wait = a.CredentialWait(client); wait == 0 {
			if a.CheckToken(tok) {
				markAuthenticated(r)
				handlers.SetOperator(c, "token")
				return true, 0
			}
			a.CredentialFailed(client)
		}
	}
	if s.IsAdmin(c) {
		markAuthenticated(r)
		handlers.SetOperator(c, s.operator(c))
		return true, 0
	}
	return false, wait
}

// identifyAdmin notes whether a public route's caller is the admin (token or session), for the
// answers that say more to the admin (/health, /ready); it refuses nobody.
func identifyAdmin(a *auth.Service, s *Sessions) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if ok, _ := adminCredentials(c, a, s); ok {
				handlers.MarkAdminCaller(c)
			}
			return next(c)
		}
	}
}

// tooManyFailures is the answer to a client whose budget of failed token or key checks is spent.
func tooManyFailures(wait time.Duration) *errs.Error {
	secs := int64((wait + time.Second - 1) / time.Second)
	return &errs.Error{Code: errs.RateLimited, Reason: "too_many_auth_failures", Msg: errs.M("err.too_many_auth_failures", secs),
		RetryAfter: wait}
}

// isLoopback reports whether an address is a loopback address.
func isLoopback(addr string) bool {
	a, err := netip.ParseAddr(addr)
	return err == nil && a.Unmap().IsLoopback()
}

// locale puts the negotiated language into the request context.
func locale() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			var choice string
			if ck, err := c.Cookie(handlers.LangCookie); err == nil {
				choice = ck.Value
			}
			l := i18n.Negotiate(choice, c.Request().Header.Get("Accept-Language"))
			c.SetRequest(c.Request().WithContext(i18n.WithLang(c.Request().Context(), l)))
			return next(c)
		}
	}
}

// crossOrigin refuses state-changing browser requests that come from another origin, using the
// Fetch metadata and Origin headers (net/http's CrossOriginProtection) and, when a browser sends
// neither (old ones), the Referer; non-browser clients, which send none of them, pass.
func crossOrigin() echo.MiddlewareFunc {
	cop := http.NewCrossOriginProtection()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			err := cop.Check(r)
			if err == nil {
				err = crossOriginReferer(r)
			}
			if err != nil {
				return &errs.Error{Code: errs.Forbidden, Reason: "forbidden", Msg: errs.M("err.cross_origin"), Err: err}
			}
			return next(c)
		}
	}
}

// crossOriginReferer is the Referer check for a state-changing request that carries neither
// Sec-Fetch-Site nor Origin (CrossOriginProtection lets those pass): a Referer naming another
// host, or none that can be read, refuses it.
func crossOriginReferer(r *http.Request) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	ref := r.Header.Get("Referer")
	if ref == "" || r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Origin") != "" {
		return nil
	}
	u, err := url.Parse(ref)
	if err != nil || u.Host == "" {
		return errors.New("cross-origin request detected from an unreadable Referer header")
	}
	if !strings.EqualFold(u.Host, r.Host) {
		return errors.New("cross-origin request detected from Referer header")
	}
	return nil
}

// adminAPI lets a request through with a logged-in session or the admin bearer token.
func adminAPI(a *auth.Service, s *Sessions) echo.MiddlewareFunc {
	return adminOr(a, s, func(echo.Context) (bool, error) { return false, nil })
}

// adminOr lets a request through with admin credentials (a session or the admin bearer token);
// without them, other decides: let it through anyway, refuse it with its own error, or (false,
// nil) ask for the admin token. Failed credentials that are being throttled answer 429.
func adminOr(a *auth.Service, s *Sessions, other func(echo.Context) (pass bool, refusal error)) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if ok, wait := adminCredentials(c, a, s); ok {
				return next(c)
			} else if wait > 0 {
				return tooManyFailures(wait)
			}
			if pass, refusal := other(c); pass {
				return next(c)
			} else if refusal != nil {
				return refusal
			}
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
			return errs.New(errs.Unauthorized, "err.admin_auth")
		}
	}
}

// dashboardAuth sends visitors without a session to the login page.
func dashboardAuth(s *Sessions) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if s.IsAdmin(c) {
				markAuthenticated(c.Request())
				handlers.SetOperator(c, s.operator(c))
				return next(c)
			}
			if c.Request().Header.Get("HX-Request") == "true" {
				c.Response().Header().Set("HX-Redirect", "/login")
				return c.NoContent(http.StatusUnauthorized)
			}
			if c.Request().Method != http.MethodGet {
				return errs.New(errs.Unauthorized, "err.login_required")
			}
			return c.Redirect(http.StatusSeeOther, "/login?next="+c.Request().URL.RequestURI())
		}
	}
}

// clientKey authenticates proxy callers by Authorization: Bearer or x-api-key and notes the key
// (with what it may address) in the trace and for the handlers. A key that does not check out spends the client address's budget of failed
// checks; while it is spent, keys from that address are not checked (429 with Retry-After), and
// other addresses are unaffected. A valid key lifts the edge's body cap and marks the connection
// authenticated; a refused call's body gets the read deadline (refusedBodyDeadline). A call for a host the gateway does not answer for passes only with a valid key
// (421 otherwise; see hostGuard).
func clientKey(k *clientkeys.Service, a *auth.Service, readTimeout time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := checkClientKey(c, k, a); err != nil {
				refusedBodyDeadline(c, readTimeout)
				return err
			}
			return next(c)
		}
	}
}

// checkClientKey is clientKey's check. It is a function of its own, never inlined, so that its
// locals are not part of the middleware's frame, which stays on the stack of every open stream.
//
//go:noinline
func checkClientKey(c echo.Context, k *clientkeys.Service, a *auth.Service) error {
	r := c.Request()
	refuse := func(e *errs.Error) error {
		if isForeignHost(c) {
			return misdirected(r)
		}
		return e
	}
	key, ok := bearer(r)
	if !ok {
		key = r.Header.Get("x-api-key")
	}
	if key == "" {
		return refuse(&errs.Error{Code: errs.Unauthorized, Reason: "missing_api_key", Msg: errs.M("proxy.missing_api_key")})
	}
	client := c.RealIP()
	if wait := a.CredentialWait(client); wait > 0 {
		return tooManyFailures(wait)
	}
	id, ok := k.Authenticate(key)
	if !ok {
		a.CredentialFailed(client)
		return refuse(&errs.Error{Code: errs.Unauthorized, Reason: "invalid_api_key", Msg: errs.M("proxy.invalid_api_key")})
	}
	markAuthenticated(r)
	liftBodyLimit(c)
	if tr := handlers.TraceOf(c); tr != nil {
		tr.ClientKeyID = id.KeyID
		if id.Access != nil { // a nil *Access in the interface would not read as nil
			tr.Access = id.Access
		}
	}
	handlers.SetClientKey(c, id)
	return nil
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:]), true
	}
	return "", false
}

package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/services/errs"
	"switchyard/services/spend"
)

// KeyLimiter keeps client keys within their limits (spend.Limiter).
type KeyLimiter interface {
	Admit(id int64, lim spend.Limits) *spend.Refusal
	Finish(id int64, lim spend.Limits, u spend.Usage, cost float64)
}

// keyLimits checks the calling key's limits before any upstream call (a refusal is a 429 in the
// surface's format, naming the limit, with Retry-After at its reset) and, once the request has
// finished, counts what it used and cost. It wraps the surfaces that generate (chat completions,
// messages, Responses); the model list and token counting are free.
func keyLimits(l KeyLimiter) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			id := handlers.ClientKeyOf(c)
			if id.KeyID == 0 || l == nil {
				return next(c)
			}
			if err := admitKey(l, id.KeyID, id.Limits); err != nil {
				return err
			}
			defer finishKey(l, c, id.KeyID, id.Limits)
			return next(c)
		}
	}
}

// admitKey asks the limiter. Like the other checks it is never inlined: the middleware's frame
// stays on the stack of every open stream.
//
//go:noinline
func admitKey(l KeyLimiter, id int64, lim spend.Limits) error {
	r := l.Admit(id, lim)
	if r == nil {
		return nil
	}
	secs := int64(r.RetryAfter.Seconds())
	e := &errs.Error{Code: errs.RateLimited, Reason: r.Code, RetryAfter: r.RetryAfter}
	switch r.Code {
	case spend.CodeBudgetExceeded:
		e.Msg = errs.M("proxy.key_budget_exceeded_"+r.Budget, r.Limit, secs)
		e.Header = http.Header{"X-Should-Retry": []string{"false"}}
	case spend.CodeTokenLimited:
		e.Msg = errs.M("proxy.key_token_limited", int64(r.Limit), secs)
	case spend.CodeParallelLimited:
		e.Msg = errs.M("proxy.key_parallel_limited", int64(r.Limit))
	default:
		e.Msg = errs.M("proxy.key_rate_limited", int64(r.Limit), secs)
	}
	// Beside the error in either format (Anthropic's has no code field): which limit, and when
	// it lets requests through again.
	e.Diagnostics = keyLimitDiagnostics{Limit: r.Code, Budget: r.Budget, Value: r.Limit, ResetsAt: r.ResetsAt.UTC()}
	return e
}

type keyLimitDiagnostics struct {
	Limit    string    `json:"limit"`
	Budget   string    `json:"budget,omitempty"`
	Value    float64   `json:"limit_value"`
	ResetsAt time.Time `json:"resets_at"`
}

// finishKey counts what the request used and cost (what the engine noted in the trace; an
// unpriced request costs the budget nothing).
//
//go:noinline
func finishKey(l KeyLimiter, c echo.Context, id int64, lim spend.Limits) {
	var u spend.Usage
	var cost float64
	if tr := handlers.TraceOf(c); tr != nil {
		u, cost = tr.Usage, tr.CostUSD
	}
	l.Finish(id, lim, u, cost)
}

package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"switchyard/services/errs"
)

// TestResult is the outcome of a connection test: a real call to the upstream's model list.
type TestResult struct {
	OK        bool   `json:"ok"`
	Models    int    `json:"models"`
	LatencyMS int64  `json:"latency_ms"`
	Message   string `json:"message"`
	// Cause is a failure in parts the dashboard can translate; nil when OK.
	Cause *FetchError `json:"-"`
}

// TestConnection lists the upstream's models with one connection's credential, whether or not the
// connection is enabled, and reports what happened.
func (e *Engine) TestConnection(ctx context.Context, id int64) (TestResult, error) {
	reg := e.opt.Catalog.Registry()
	c, ok := reg.Connection(id)
	if !ok {
		return TestResult{}, errs.New(errs.NotFound, "err.connection_not_found", id)
	}
	if c.Broken != "" {
		return TestResult{Message: c.Broken}, nil
	}
	p, ok := reg.Provider(c.Provider)
	if !ok {
		return TestResult{}, errs.New(errs.NotFound, "err.connection_not_found", id)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := e.opt.Clock.Now()
	names, err := FetchModels(ctx, e.opt.Client, p, c, ModelAuth{Tokens: e.opt.Accounts, Copilot: e.opt.Copilot, OAuth: e.opt.OAuthSettings})
	res := TestResult{LatencyMS: e.opt.Clock.Now().Sub(start).Milliseconds()}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.Message = "the upstream did not answer within 20 s"
			res.Cause = &FetchError{Kind: "timeout", Err: err}
		} else {
			res.Message, res.Cause = err.Error(), AsFetchError(err)
		}
		return res, nil
	}
	res.OK, res.Models = true, len(names)
	res.Message = fmt.Sprintf("connected: %d models available", len(names))
	return res, nil
}

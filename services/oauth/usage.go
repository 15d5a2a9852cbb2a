package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"switchyard/services/catalog"
	"switchyard/services/redact"
	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// pollGap is the least time between two polls of one account that a 429 asks for; the regular
// interval is a setting.
const pollGap = 30 * time.Second

// PollSoon asks the usage poller to read an account's usage now (after a 429). It never blocks.
func (s *Service) PollSoon(id int64) {
	select {
	case s.polls <- id:
	default: // the poller is busy with many; the next round reads this one too
	}
}

// RunUsagePoller reads every Claude account's usage each poll interval, and an account at once
// when PollSoon asks for it, until ctx ends.
func (s *Service) RunUsagePoller(ctx context.Context) {
	last := map[int64]time.Time{}
	for {
		interval := time.Duration(s.opt.Settings.Snapshot().Claude().UsagePollIntervalMS) * time.Millisecond
		for _, c := range s.pollable() {
			if t, ok := last[c.ID]; ok && s.opt.Clock.Since(t) < interval {
				continue
			}
			last[c.ID] = s.opt.Clock.Now()
			s.pollOne(ctx, c)
		}
		var next time.Time // when the next account is due
		for _, c := range s.pollable() {
			if at := last[c.ID].Add(interval); next.IsZero() || at.Before(next) {
				next = at
			}
		}
		if !next.IsZero() && !s.opt.Clock.Now().Before(next) {
			continue // due already (the clock moved while polling)
		}
		tick, stop, set := alarmAt(s.opt.Clock, next)
		if !set {
			continue
		}
		select {
		case <-ctx.Done():
			stop()
			return
		case <-tick:
		case <-s.changed:
		case id := <-s.polls:
			if c, ok := s.opt.Catalog.Registry().Connection(id); ok && c.OAuth != nil && !c.OAuth.SetupToken() &&
				s.opt.Clock.Since(last[id]) >= pollGap {
				last[id] = s.opt.Clock.Now()
				s.pollOne(ctx, c)
			}
		}
		stop()
	}
}

// pollable lists the accounts whose usage can be read: signed-in accounts (a setup token's
// scope does not reach the usage API), enabled, not expired.
func (s *Service) pollable() []*catalog.ConnEntry {
	reg := s.opt.Catalog.Registry()
	var out []*catalog.ConnEntry
	for _, p := range reg.Providers() {
		if p.Type != catalog.TypeAnthropic { // the other kinds report usage on their answers
			continue
		}
		for _, c := range p.Conns {
			if c.OAuth == nil || c.OAuth.SetupToken() {
				continue
			}
			if st, ok := s.State(c.ID); ok && st.Expired {
				continue
			}
			out = append(out, c)
		}
	}
	return out
}

// usageAnswer is the usage API's answer (utilisation in percent).
type usageAnswer struct {
	FiveHour *usageWindow `json:"five_hour"`
	SevenDay *usageWindow `json:"seven_day"`
	// JuniperTide is the weekly reset of the session limit, present with ?at_wall=1.
	JuniperTide *struct {
		Arm             string `json:"arm"`
		Available       bool   `json:"available"`
		NextAvailableAt string `json:"next_available_at"`
	} `json:"juniper_tide"`
}

type usageWindow struct {
	Utilization *float64 `json:"utilization"`
	ResetsAt    string   `json:"resets_at"`
}

func (w *usageWindow) window() *resilience.UsageWindow {
	if w == nil || w.Utilization == nil {
		return nil
	}
	out := &resilience.UsageWindow{Utilization: *w.Utilization, ResetsAt: parseTime(w.ResetsAt)}
	return out
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil && n > 0 {
		return time.UnixMilli(int64(n * 1000))
	}
	return time.Time{}
}

func (s *Service) pollOne(ctx context.Context, c *catalog.ConnEntry) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var ans usageAnswer
	readings := s.opt.Usage.Readings(c.ID) // what answers tell from now on is newer than this poll
	if err := s.accountCall(ctx, c, http.MethodGet, "", nil, &ans); err != nil {
		s.opt.Log.Debug("usage poll failed", "connection_id", c.ID, "error", err)
		s.opt.Usage.PollFailed(c.ID, err.Error())
		return
	}
	s.opt.Usage.PolledAfter(c.ID, readings, ans.FiveHour.window(), ans.SevenDay.window())
}

// LimitReset claims the weekly reset of the session limit for an account at its 5-hour wall:
// the usage check (?at_wall=1&skip_spend=1) says whether the reset is offered and available;
// only then is it claimed (POST /api/organizations/{org}/reset_rate_limits). The outcome is the
// claim's result, already_used or not_offered from the check, or error.
func (s *Service) LimitReset(ctx context.Context, c *catalog.ConnEntry) resilience.ResetOutcome {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var check usageAnswer
	if err := s.accountCall(ctx, c, http.MethodGet, "?at_wall=1&skip_spend=1", nil, &check); err != nil {
		s.opt.Log.Warn("limit reset check failed", "connection_id", c.ID, "error", err)
		return resilience.ResetOutcome{Result: resilience.ResetError}
	}
	jt := check.JuniperTide
	switch {
	case jt == nil || jt.Arm != "reset":
		return resilience.ResetOutcome{Result: resilience.ResetNotOffered}
	case !jt.Available:
		return resilience.ResetOutcome{Result: resilience.ResetAlreadyUsed, NextAvailable: parseTime(jt.NextAvailableAt)}
	}
	org := ""
	if c.OAuth != nil {
		org = c.OAuth.Account.OrganizationUUID
	}
	if org == "" {
		s.opt.Log.Warn("limit reset offered, but the account's organization is unknown", "connection_id", c.ID)
		return resilience.ResetOutcome{Result: resilience.ResetError}
	}
	var claim struct {
		Result          string `json:"result"`
		NextAvailableAt string `json:"next_available_at"`
	}
	path := "/api/organizations/" + url.PathEscape(org) + "/reset_rate_limits"
	if err := s.accountCall(ctx, c, http.MethodPost, path, map[string]string{"program": "juniper_tide"}, &claim); err != nil {
		s.opt.Log.Warn("limit reset failed", "connection_id", c.ID, "error", err)
		return resilience.ResetOutcome{Result: resilience.ResetError}
	}
	switch claim.Result {
	case resilience.ResetDone, resilience.ResetNotLimited, resilience.ResetAlreadyUsed, resilience.ResetNotOffered:
		s.opt.Log.Info("limit reset", "connection_id", c.ID, "result", claim.Result)
		return resilience.ResetOutcome{Result: claim.Result, NextAvailable: parseTime(claim.NextAvailableAt)}
	}
	return resilience.ResetOutcome{Result: resilience.ResetError}
}

// accountCall calls one of Anthropic's account endpoints as Claude Code does. path is a query
// for the usage address ("?…", "" for none) or a path on its host ("/api/…").
func (s *Service) accountCall(ctx context.Context, c *catalog.ConnEntry, method, path string, body, out any) error {
	cfg := s.opt.Settings.Snapshot().Claude()
	target, err := accountURL(cfg, path)
	if err != nil {
		return err
	}
	token, err := s.Token(ctx, c)
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("anthropic-beta", oauthBeta)
	req.Header.Set("User-Agent", userAgent(cfg))
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.opt.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if isRedirect(resp.StatusCode) { // not followed: it would carry the account's token elsewhere
		return fmt.Errorf("%s answered HTTP %d, a redirect to %s, which is not followed", req.URL.Path, resp.StatusCode,
			redact.Redirect(req.URL, resp.Header.Get("Location"), token))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered HTTP %d", req.URL.Path, resp.StatusCode)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: not the expected JSON: %w", req.URL.Path, err)
	}
	return nil
}

// accountURL is the usage address with a query, or a path on the usage address's host.
func accountURL(cfg settings.ClaudeOAuth, path string) (string, error) {
	u, err := url.Parse(cfg.UsageURL)
	if err != nil {
		return "", err
	}
	switch {
	case path == "":
	case path[0] == '?':
		u.RawQuery = path[1:]
	default:
		u.Path, u.RawQuery = path, ""
	}
	return u.String(), nil
}

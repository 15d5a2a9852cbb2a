package spend

import (
	"net/url"
	"strings"

	"switchyard/services/errs"
)

// Limits are a client key's limits; a zero field is no limit.
type Limits struct {
	// RPM is requests per minute (a sliding minute).
	RPM int64 `json:"rpm_limit,omitempty"`
	// TPM is input and output tokens per minute (a sliding minute).
	TPM int64 `json:"tpm_limit,omitempty"`
	// DailyUSD and MonthlyUSD are spend per calendar day and month in the configured time zone.
	DailyUSD   float64 `json:"daily_budget_usd,omitempty"`
	MonthlyUSD float64 `json:"monthly_budget_usd,omitempty"`
	// MaxParallel is how many of the key's requests may run at once.
	MaxParallel int64 `json:"max_parallel,omitempty"`
	// WebhookURL receives a POST when the key crosses 80 % and 100 % of a budget.
	WebhookURL string `json:"budget_webhook_url,omitempty"`
}

// None reports whether the key has no limit at all (a webhook alone limits nothing).
func (l Limits) None() bool {
	return l.RPM == 0 && l.TPM == 0 && l.DailyUSD == 0 && l.MonthlyUSD == 0 && l.MaxParallel == 0
}

// LimitsInput changes limits: a nil field stays as it is, 0 (or "") removes the limit.
type LimitsInput struct {
	RPM         *int64   `json:"rpm_limit"`
	TPM         *int64   `json:"tpm_limit"`
	DailyUSD    *float64 `json:"daily_budget_usd"`
	MonthlyUSD  *float64 `json:"monthly_budget_usd"`
	MaxParallel *int64   `json:"max_parallel"`
	WebhookURL  *string  `json:"budget_webhook_url"`
}

// The largest values a limit takes: beyond them a limit limits nothing a gateway sees.
const (
	MaxRPM       = 1_000_000
	MaxTPM       = 1_000_000_000
	MaxBudgetUSD = 10_000_000
	MaxParallel  = 100_000
)

// Apply changes l by in and adds the field errors to bad (field name → message).
func (l *Limits) Apply(in LimitsInput, bad map[string]errs.Msg) {
	count := func(field string, p *int64, max int64, dst *int64) {
		if p == nil {
			return
		}
		if *p < 0 || *p > max {
			bad[field] = errs.M("keys.err.limit_range", max)
			return
		}
		*dst = *p
	}
	money := func(field string, p *float64, dst *float64) {
		if p == nil {
			return
		}
		if !(*p >= 0 && *p <= MaxBudgetUSD) { // also refuses NaN
			bad[field] = errs.M("keys.err.budget_range", MaxBudgetUSD)
			return
		}
		*dst = *p
	}
	count("rpm_limit", in.RPM, MaxRPM, &l.RPM)
	count("tpm_limit", in.TPM, MaxTPM, &l.TPM)
	count("max_parallel", in.MaxParallel, MaxParallel, &l.MaxParallel)
	money("daily_budget_usd", in.DailyUSD, &l.DailyUSD)
	money("monthly_budget_usd", in.MonthlyUSD, &l.MonthlyUSD)
	if in.WebhookURL != nil {
		u := strings.TrimSpace(*in.WebhookURL)
		if u != "" && !ValidWebhookURL(u) {
			bad["budget_webhook_url"] = errs.M("keys.err.webhook_url")
		} else {
			l.WebhookURL = u
		}
	}
}

// ValidWebhookURL reports whether u is an absolute http(s) URL with a host.
func ValidWebhookURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" && len(u) <= 2048
}

// KeyUse is a key's use against its limits now, for the keys page and the API.
type KeyUse struct {
	Limits Limits `json:"limits"`
	// Requests and Tokens are the last minute's.
	Requests int64 `json:"requests_last_minute"`
	Tokens   int64 `json:"tokens_last_minute"`
	// DaySpend and MonthSpend are the current day's and month's spend in USD.
	DaySpend   float64 `json:"day_spend_usd"`
	MonthSpend float64 `json:"month_spend_usd"`
	// Parallel is the key's requests running now.
	Parallel int64 `json:"parallel"`
}

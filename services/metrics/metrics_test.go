package metrics

import (
	"math"
	"net/http/httptest"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads /metrics as Prometheus would (the text exposition, parsed) and returns the
// samples of one counter family by their label values joined with "|", in the order given.
func scrape(t *testing.T, m *Metrics, name string, labels ...string) map[string]float64 {
	t.Helper()
	fams := exposition(t, m)
	out := map[string]float64{}
	fam, ok := fams[name]
	if !ok {
		return out
	}
	if typ := fam.GetType().String(); typ != "COUNTER" {
		t.Errorf("%s is a %s", name, typ)
	}
	for _, m := range fam.GetMetric() {
		out[labelKey(m, labels)] = m.GetCounter().GetValue()
	}
	return out
}

// exposition serves /metrics and parses it as Prometheus would.
func exposition(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// labelKey is a sample's values of labels, joined with "|".
func labelKey(m *dto.Metric, labels []string) string {
	key := ""
	for i, l := range labels {
		if i > 0 {
			key += "|"
		}
		for _, lp := range m.GetLabel() {
			if lp.GetName() == l {
				key += lp.GetValue()
			}
		}
	}
	return key
}

func equal(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
		return
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || math.Abs(g-v) > 1e-12 {
			t.Errorf("%s[%s] = %v (present %v), want %v", what, k, g, ok, v)
		}
	}
}

// Spend adds tokens by kind always and USD only for priced requests: an unpriced model has no
// spend series (not a 0), a priced one at 0 USD (a subscription) has one at 0.
func TestSpendCounters(t *testing.T) {
	m := New()
	for range 2 {
		m.Spend("agent", "openai", "gpt-x", 1000, 200, 300, 100, 50, 0.0123, true)
	}
	m.Spend("agent", "openai", "unlisted", 10, 5, 0, 0, 0, 0, false)
	m.Spend("team", "claude", "claude-x", 7, 3, 0, 0, 0, 0, true)
	m.Spend("team", "claude", "claude-x", 0, 0, 0, 0, 0, math.NaN(), true)
	m.Spend("team", "claude", "claude-x", 0, 0, 0, 0, 0, -1, true)
	m.Spend("team", "claude", "claude-x", -5, 0, 0, 0, 0, math.Inf(1), true)

	equal(t, "switchyard_spend_usd_total", scrape(t, m, "switchyard_spend_usd_total", "key", "provider", "model"),
		map[string]float64{"agent|openai|gpt-x": 0.0246, "team|claude|claude-x": 0})
	equal(t, "switchyard_key_tokens_total", scrape(t, m, "switchyard_key_tokens_total", "key", "provider", "model", "kind"),
		map[string]float64{
			"agent|openai|gpt-x|input": 2000, "agent|openai|gpt-x|output": 400, "agent|openai|gpt-x|cache_read": 600,
			"agent|openai|gpt-x|cache_write": 200, "agent|openai|gpt-x|reasoning": 100,
			"agent|openai|unlisted|input": 10, "agent|openai|unlisted|output": 5, "agent|openai|unlisted|cache_read": 0,
			"agent|openai|unlisted|cache_write": 0, "agent|openai|unlisted|reasoning": 0,
			"team|claude|claude-x|input": 7, "team|claude|claude-x|output": 3, "team|claude|claude-x|cache_read": 0,
			"team|claude|claude-x|cache_write": 0, "team|claude|claude-x|reasoning": 0,
		})
}

// ForgetKey drops a key name's series; the name used again starts afresh and is exported (the
// cache holds no counter the registry dropped), also when requests raced the forgetting.
func TestForgetKey(t *testing.T) {
	m := New()
	m.Spend("old", "openai", "gpt-x", 10, 1, 0, 0, 0, 1, true)
	m.Spend("kept", "openai", "gpt-x", 20, 2, 0, 0, 0, 2, true)
	m.ForgetKey("old")
	equal(t, "spend after ForgetKey", scrape(t, m, "switchyard_spend_usd_total", "key"), map[string]float64{"kept": 2})
	for k := range scrape(t, m, "switchyard_key_tokens_total", "key", "kind") {
		if k[:4] == "old|" {
			t.Errorf("a token series of the forgotten key is left: %s", k)
		}
	}

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				if i == 0 {
					m.ForgetKey("old")
				} else {
					m.Spend("old", "openai", "gpt-x", 1, 1, 0, 0, 0, 0.5, true)
				}
			}
		})
	}
	wg.Wait()
	m.ForgetKey("old")
	m.Spend("old", "openai", "gpt-x", 3, 0, 0, 0, 0, 0.25, true)
	equal(t, "spend of the name used again", scrape(t, m, "switchyard_spend_usd_total", "key"),
		map[string]float64{"kept": 2, "old": 0.25})
	if got := scrape(t, m, "switchyard_key_tokens_total", "key", "kind")["old|input"]; got != 3 {
		t.Errorf("input tokens of the name used again = %v, want 3", got)
	}
}

// Every webhook outcome is exported from the start (at 0), and WebhookDelivery counts them.
func TestWebhookDeliveries(t *testing.T) {
	m := New()
	equal(t, "at start", scrape(t, m, "switchyard_webhook_deliveries_total", "outcome"),
		map[string]float64{"delivered": 0, "retry": 0, "failed": 0, "dropped": 0})
	for _, o := range []string{"retry", "retry", "delivered", "dropped", "failed"} {
		m.WebhookDelivery(o)
	}
	equal(t, "counted", scrape(t, m, "switchyard_webhook_deliveries_total", "outcome"),
		map[string]float64{"delivered": 1, "retry": 2, "failed": 1, "dropped": 1})
}

// BenchmarkSpend is the cost of one finished request's accounting on the request path.
func BenchmarkSpend(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		m.Spend("agent", "openai", "gpt-4.1-mini", 1200, 300, 1000, 0, 40, 0.0012, true)
	}
}

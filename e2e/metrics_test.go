package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

func TestMetricsEndpoint(t *testing.T) {
	e, _, key, _, _ := twoKeysBAnswers(t, testenv.Status(429, map[string]string{"Retry-After": "9"}, `{"error":{"message":"rate limited"}}`))
	resp, _ := http.Get(e.Base + "/metrics")
	testenv.ReadAll(t, resp)
	if resp.StatusCode != 401 {
		t.Fatalf("metrics without the admin token: %d", resp.StatusCode)
	}
	testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
	// The request is counted just after its answer went out.
	var m string
	e.Eventually("the request is counted", func() bool {
		m = e.Metrics()
		return strings.Contains(m, `switchyard_requests_total{model="gpt-test",provider="up",route="/v1/chat/completions",status="200"} 1`)
	})
	for _, want := range []string{
		`switchyard_requests_total{model="gpt-test",provider="up",route="/v1/chat/completions",status="200"} 1`,
		`switchyard_upstream_attempts_total{outcome="rate_limit",provider="up"} 1`,
		`switchyard_upstream_attempts_total{outcome="ok",provider="up"} 1`,
		`switchyard_upstream_retries_total{kind="failover",provider="up"} 1`,
		`switchyard_connection_state{connection="a",provider="up",status="cooling"} 1`,
		`switchyard_connection_state{connection="b",provider="up",status="active"} 1`,
		`switchyard_tokens_total{model="gpt-test",provider="up",type="input"} 3`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Log(m)
	}
}

package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

func (e *testEnv) metrics() string {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		e.t.Fatalf("metrics: %d", resp.StatusCode)
	}
	return readAll(e.t, resp)
}

func TestMetricsEndpoint(t *testing.T) {
	e, _, key, _, _ := twoKeys(t, byKey(map[string]http.HandlerFunc{
		"sk-a": status(429, map[string]string{"Retry-After": "9"}, `{"error":{"message":"rate limited"}}`),
		"sk-b": jsonAnswer(completionJSON),
	}))
	resp, _ := http.Get(e.base + "/metrics")
	readAll(t, resp)
	if resp.StatusCode != 401 {
		t.Fatalf("metrics without the admin token: %d", resp.StatusCode)
	}
	readAll(t, e.chat(context.Background(), key, chatBody))
	m := e.metrics()
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

package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDiscoveryHidesFailedProviderAndRecheckRestoresIt(t *testing.T) {
	good := newFakeUpstream(t, jsonAnswer(completionJSON), "good-model")
	flaky := newFakeUpstream(t, jsonAnswer(completionJSON), "flaky-model")
	flaky.modelsDown.Store(true)
	e := newTestEnv(t)
	e.addProvider("good", good.URL+"/v1")
	e.addProvider("flaky", flaky.URL+"/v1")
	e.addConnection("good", "k", "sk-good", 0)
	e.addConnection("flaky", "k", "sk-flaky", 0)
	key := e.newKey()
	e.waitModels(key, "good/good-model")
	if ids := e.listModels(key); slices.Contains(ids, "flaky/flaky-model") {
		t.Fatalf("a failed provider's models are listed: %v", ids)
	}
	// Direct requests to the failed provider's models are still sent.
	r := e.chat(context.Background(), key, `{"model":"flaky/flaky-model","messages":[]}`)
	readAll(t, r)
	if r.StatusCode != 200 || len(flaky.chatRequests()) != 1 {
		t.Fatalf("direct request: %d", r.StatusCode)
	}
	// A model the inventory does not list is counted under one bounded label.
	if m := e.metrics(); !strings.Contains(m, `switchyard_requests_total{model="unlisted",provider="flaky",route="/v1/chat/completions",status="200"} 1`) {
		t.Error("an unlisted model must be counted as unlisted")
	}
	// The upstream recovers; the recheck of failed providers brings its models back.
	flaky.modelsDown.Store(false)
	e.eventually("the recheck restores the models", func() bool {
		e.clock.Advance(time.Minute)
		return slices.Contains(e.listModels(key), "flaky/flaky-model")
	})
	// When every provider fails at once, the last inventory stays listed.
	good.modelsDown.Store(true)
	flaky.modelsDown.Store(true)
	e.clock.Advance(time.Hour)
	e.eventually("both refreshes fail", func() bool {
		st, _ := e.app.Inventory.ProviderStatus("good")
		st2, _ := e.app.Inventory.ProviderStatus("flaky")
		return !st.OK && !st2.OK
	})
	if ids := e.listModels(key); len(ids) != 2 {
		t.Fatalf("all failing: want the last inventory, got %v", ids)
	}
}

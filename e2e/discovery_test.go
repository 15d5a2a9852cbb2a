package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

func TestDiscoveryHidesFailedProviderAndRecheckRestoresIt(t *testing.T) {
	good := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "good-model")
	flaky := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "flaky-model")
	flaky.ModelsDown.Store(true)
	e := testenv.New(t)
	e.AddProvider("good", good.URL+"/v1")
	e.AddProvider("flaky", flaky.URL+"/v1")
	e.AddConnection("good", "k", "sk-good", 0)
	e.AddConnection("flaky", "k", "sk-flaky", 0)
	key := e.NewKey()
	e.WaitModels(key, "good/good-model")
	if ids := e.ListModels(key); slices.Contains(ids, "flaky/flaky-model") {
		t.Fatalf("a failed provider's models are listed: %v", ids)
	}
	// Direct requests to the failed provider's models are still sent.
	r := e.Chat(context.Background(), key, `{"model":"flaky/flaky-model","messages":[]}`)
	testenv.ReadAll(t, r)
	if r.StatusCode != 200 || len(flaky.ChatRequests()) != 1 {
		t.Fatalf("direct request: %d", r.StatusCode)
	}
	// A model the inventory does not list is counted under one bounded label.
	if m := e.Metrics(); !strings.Contains(m, `switchyard_requests_total{model="unlisted",provider="flaky",route="/v1/chat/completions",status="200"} 1`) {
		t.Error("an unlisted model must be counted as unlisted")
	}
	// The upstream recovers; the recheck of failed providers brings its models back.
	flaky.ModelsDown.Store(false)
	e.Eventually("the recheck restores the models", func() bool {
		e.Clock.Advance(time.Minute)
		return slices.Contains(e.ListModels(key), "flaky/flaky-model")
	})
	// When every provider fails at once, the last inventory stays listed.
	good.ModelsDown.Store(true)
	flaky.ModelsDown.Store(true)
	e.Clock.Advance(time.Hour)
	e.Eventually("both refreshes fail", func() bool {
		st, _ := e.App.Inventory.ProviderStatus("good")
		st2, _ := e.App.Inventory.ProviderStatus("flaky")
		return !st.OK && !st2.OK
	})
	if ids := e.ListModels(key); len(ids) != 2 {
		t.Fatalf("all failing: want the last inventory, got %v", ids)
	}
}

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// droppedFields are chat completions fields the messages format has no equivalent for.
const droppedFields = `"logprobs":true,"presence_penalty":0.5,"messages":[{"role":"user","content":"hi"}]`

// chatWithDropped sends a chat completions request carrying droppedFields to model and wants 200.
func chatWithDropped(t *testing.T, e *testenv.Env, key, model string, stream bool) *http.Response {
	t.Helper()
	body := `{"model":"` + model + `",` + droppedFields
	if stream {
		body += `,"stream":true`
	}
	r := e.Chat(context.Background(), key, body+`}`)
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("%s (stream %v): %d %s", model, stream, r.StatusCode, got)
	}
	return r
}

// droppedOf is the request-log row's dropped names, from the list and from the single read
// (both must say the same, as an array, also when empty), found by the answer's X-Request-Id.
func droppedOf(t *testing.T, e *testenv.Env, r *http.Response) (id int64, names []string) {
	t.Helper()
	row := loggedRow(e, r)
	raw, ok := row["dropped"].([]any)
	if !ok {
		t.Fatalf("the listed row has no dropped array: %#v", row["dropped"])
	}
	names = []string{}
	for _, n := range raw {
		names = append(names, n.(string))
	}
	id = int64(row["id"].(float64))
	var detail struct{ Dropped []string }
	if code := e.API("GET", fmt.Sprintf("/api/requests/%d", id), nil, &detail); code != 200 || detail.Dropped == nil ||
		!slices.Equal(detail.Dropped, names) {
		t.Fatalf("the single read (%d) says dropped %q, the list %q", code, detail.Dropped, names)
	}
	return id, names
}

// TestRequestLogDroppedNothing: a request that reaches an upstream of its own format drops
// nothing, whatever fields it carries: its row says "dropped": [] in the list and the single
// read, its page has no "Dropped in translation" line and the list does not mark it.
func TestRequestLogDroppedNothing(t *testing.T) {
	e, key := gatewayWith(t, testenv.MessagesAnswer(), testenv.JSONAnswer(testenv.CompletionJSON))
	id, names := droppedOf(t, e, chatWithDropped(t, e, key, "up/gpt-test", false))
	if len(names) != 0 {
		t.Errorf("a request passed through as it is names dropped fields: %q", names)
	}
	d := newStateDash(t, e)
	for _, lang := range i18n.Langs {
		d.setLang(lang)
		if page := d.get(fmt.Sprintf("/requests/%d", id), false); !strings.Contains(page, `id="request-summary"`) ||
			strings.Contains(page, `id="request-dropped"`) || strings.Contains(page, d.text("requests.dropped")) {
			t.Errorf("%s: the page of a request that dropped nothing says it did (or is not its page)", lang)
		}
		row := testenv.Between(d.get("/requests", false), fmt.Sprintf(`id="req-%d"`, id), `</tr>`)
		if !strings.Contains(row, "<code>up/gpt-test</code>") || strings.Contains(row, "req-dropped") {
			t.Errorf("%s: the list marks (or lacks) the request that dropped nothing: %q", lang, row)
		}
	}
}

// TestRequestLogNamesWhatTranslationDropped: a chat completions request with fields the messages
// format has no equivalent for (logprobs, presence_penalty), sent to an Anthropic provider,
// buffered or streamed, is logged with their names: in the API (list and single read), on its
// page ("Dropped in translation: …" in both languages), and the list marks it.
//
// The engine names what it dropped in Trace.Dropped; until it does, these rows read [] and this
// test fails.
func TestRequestLogNamesWhatTranslationDropped(t *testing.T) {
	e, key := gatewayWith(t, testenv.MessagesAnswer(), testenv.JSONAnswer(testenv.CompletionJSON))
	var translated []int64
	for _, stream := range []bool{false, true} {
		id, names := droppedOf(t, e, chatWithDropped(t, e, key, "anthropic/claude-test", stream))
		translated = append(translated, id)
		for _, want := range []string{"logprobs", "presence_penalty"} {
			if !slices.Contains(names, want) {
				t.Errorf("stream %v: dropped %q lacks %q", stream, names, want)
			}
		}
		for _, carried := range []string{"model", "messages", "stream"} {
			if slices.Contains(names, carried) {
				t.Errorf("stream %v: dropped %q names %q, which was carried", stream, names, carried)
			}
		}
	}
	d := newStateDash(t, e)
	for _, lang := range i18n.Langs {
		d.setLang(lang)
		for _, id := range translated {
			line := testenv.Between(d.get(fmt.Sprintf("/requests/%d", id), false), `id="request-dropped"`, `</p>`)
			if !strings.Contains(line, d.text("requests.dropped")) || !strings.Contains(line, "<code>logprobs</code>") ||
				!strings.Contains(line, "<code>presence_penalty</code>") {
				t.Errorf("%s: request %d's page has no line naming what was dropped: %q", lang, id, line)
			}
		}
		row := testenv.Between(d.get("/requests", false), fmt.Sprintf(`id="req-%d"`, translated[0]), `</tr>`)
		if !strings.Contains(row, `class="muted small req-dropped"`) {
			t.Errorf("%s: the list does not mark the translated request: %q", lang, row)
		}
	}
}

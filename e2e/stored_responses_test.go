package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// orgStore plays OpenAI's Responses API for the keys of several organisations: what an answer
// stores (store is not false) belongs to the organisation of the key that made it, and a request
// that names another's — previous_response_id, an item_reference, a reasoning item by id — is
// answered as OpenAI answers it: 400 previous_response_not_found, 404 "Item with id … not found".
type orgStore struct {
	mu     sync.Mutex
	orgs   map[string]string          // key → organisation
	stored map[string]map[string]bool // organisation → ids it stores
	n      int
	calls  []string       // the organisation of each call, in order
	busy   map[string]int // answers an organisation's keys get 429 for
}

func newOrgStore(keys map[string]string) *orgStore {
	s := &orgStore{orgs: keys, stored: map[string]map[string]bool{}, busy: map[string]int{}}
	for _, org := range keys {
		s.stored[org] = map[string]bool{}
	}
	return s
}

// put stores ids for org, as if a client had made them there without the gateway.
func (s *orgStore) put(org string, ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.stored[org][id] = true
	}
}

func (s *orgStore) called() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *orgStore) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	org := s.orgs[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	s.calls = append(s.calls, org)
	has := s.stored[org]
	if s.busy[org] > 0 {
		s.busy[org]--
		s.mu.Unlock()
		testenv.Status(429, map[string]string{"Retry-After": "20"}, `{"error":{"message":"Rate limit reached for gpt-5 in organization org-`+org+
			` on requests per min (RPM): Limit 3, Used 3.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)(w, r)
		return
	}
	if prev := gjson.GetBytes(body, "previous_response_id").String(); prev != "" && !has[prev] {
		s.mu.Unlock()
		testenv.Status(400, nil, `{"error":{"message":"Previous response with id '`+prev+`' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`)(w, r)
		return
	}
	for _, it := range gjson.GetBytes(body, "input").Array() {
		typ, id := it.Get("type").String(), it.Get("id").String()
		if (typ == "item_reference" || typ == "reasoning" && !it.Get("encrypted_content").Exists()) && !has[id] {
			s.mu.Unlock()
			testenv.Status(404, nil, `{"error":{"message":"Item with id '`+id+`' not found. Items are not persisted when `+"`store`"+
				` is set to false. Try again with `+"`store`"+` set to true, or remove this item from your input.","type":"invalid_request_error","param":"input","code":null}}`)(w, r)
			return
		}
	}
	s.n++
	resp, rs, msg := fmt.Sprintf("resp_%s_%d", org, s.n), fmt.Sprintf("rs_%s_%d", org, s.n), fmt.Sprintf("msg_%s_%d", org, s.n)
	if gjson.GetBytes(body, "store").Type != gjson.False {
		has[resp], has[rs], has[msg] = true, true, true
	}
	s.mu.Unlock()
	output := `{"type":"reasoning","id":"` + rs + `","summary":[]},{"type":"message","id":"` + msg +
		`","status":"completed","role":"assistant","content":[{"type":"output_text","text":"from ` + org + `","annotations":[]}]}`
	whole := `{"id":"` + resp + `","object":"response","created_at":1,"status":"completed","model":"gpt-5","output":[` + output +
		`],"usage":{"input_tokens":5,"output_tokens":3,"total_tokens":8}}`
	if !gjson.GetBytes(body, "stream").Bool() {
		testenv.JSONAnswer(whole)(w, r)
		return
	}
	start := `{"id":"` + resp + `","object":"response","created_at":1,"status":"in_progress","model":"gpt-5","output":[],"usage":null}`
	testenv.SSEAnswer([]string{
		`event: response.created` + "\n" + `data: {"type":"response.created","sequence_number":0,"response":` + start + `}`,
		`event: response.output_text.delta` + "\n" + `data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"` + msg +
			`","output_index":1,"content_index":0,"delta":"from ` + org + `"}`,
		`event: response.completed` + "\n" + `data: {"type":"response.completed","sequence_number":2,"response":` + whole + `}`,
	}, -1)(w, r)
}

// TestStoredResponsesFollowTheirOrganisation: a provider whose connections are keys of two
// organisations, taken in turn (round-robin). A Responses client that builds on stored state —
// previous_response_id (the official SDK), item references (the Vercel AI SDK with store on) —
// has each request sent to the organisation that stored what it names; state the gateway does
// not know of is found by failing over on the upstream's "not found", which is held against
// neither the connection nor the model; state no connection holds is the client's 400 or 404.
func TestStoredResponsesFollowTheirOrganisation(t *testing.T) {
	store := newOrgStore(map[string]string{"sk-org-a": "a", "sk-org-b": "b"})
	up := testenv.NewFakeUpstream(t, toolOpenAI, "gpt-5")
	up.ServeResponses(store.serve)
	e := testenv.New(t)
	pid := e.AddProviderOfType("multi", "openai", up.URL+"/v1")
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", pid), map[string]any{"strategy": "round-robin"}, 200)
	connA := e.AddConnection("multi", "org-a", "sk-org-a", 0)
	connB := e.AddConnection("multi", "org-b", "sk-org-b", 0)
	// Model lockouts on, so a "not found" that locked the model would show.
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"model_lockout": map[string]any{"enabled": true}}, 200)
	key := e.NewKey()
	e.WaitModels(key, "multi/gpt-5")
	client := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
	ctx := context.Background()
	orgOf := func(r *responses.Response) string { return strings.Split(r.ID, "_")[1] }
	send := func(stream bool, params responses.ResponseNewParams) *responses.Response {
		t.Helper()
		return runResponse(t, client, ctx, params, stream)
	}

	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("previous_response_id/stream=%v", stream), func(t *testing.T) {
			first := send(stream, responses.ResponseNewParams{Model: "multi/gpt-5",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hello.")}})
			org := orgOf(first)
			calls := len(store.called())
			prev := first.ID
			for i := range 4 { // round-robin would take the other organisation every other time
				next := send(stream, responses.ResponseNewParams{Model: "multi/gpt-5", PreviousResponseID: openai.String(prev),
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("And %d?", i))}})
				if orgOf(next) != org {
					t.Fatalf("turn %d answered by organisation %s, the conversation is %s's", i, orgOf(next), org)
				}
				prev = next.ID
			}
			if got := store.called()[calls:]; !slices.Equal(got, []string{org, org, org, org}) {
				t.Fatalf("upstream calls %q: every turn goes to %s at once", got, org)
			}
		})
	}

	// The Vercel AI SDK with store on names earlier items by reference.
	t.Run("item references", func(t *testing.T) {
		first := send(false, responses.ResponseNewParams{Model: "multi/gpt-5",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Think.")}})
		org, n := orgOf(first), strings.Split(first.ID, "_")[2]
		calls := len(store.called())
		for i := range 3 {
			body := `{"model":"multi/gpt-5","input":[{"role":"user","content":"Think."},{"type":"item_reference","id":"rs_` + org + `_` + n +
				`"},{"type":"item_reference","id":"msg_` + org + `_` + n + `"},{"role":"user","content":"Again ` + fmt.Sprint(i) + `."}]}`
			resp := e.Post(ctx, "/v1/responses", key, body, nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(gjson.GetBytes(b, "id").String(), "resp_"+org+"_") {
				t.Fatalf("turn %d: %d %s", i, resp.StatusCode, b)
			}
		}
		if got := store.called()[calls:]; !slices.Equal(got, []string{org, org, org}) {
			t.Fatalf("upstream calls %q, want each at %s at once", got, org)
		}
	})

	// A response the gateway never saw (made with the key directly): the
	// organisation that does not hold it says so, the request fails over, and the one that
	// holds it is remembered. The connections are now taken in their order, org-a first.
	t.Run("unknown to the gateway", func(t *testing.T) {
		e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", pid), map[string]any{"strategy": "priority"}, 200)
		store.put("b", "resp_b_elsewhere")
		post := func(body string) (*http.Response, string) {
			resp := e.Post(ctx, "/v1/responses", key, body, nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp, string(b)
		}
		calls := len(store.called())
		resp, b := post(`{"model":"multi/gpt-5","previous_response_id":"resp_b_elsewhere","input":"Go on."}`)
		if resp.StatusCode != 200 || !strings.HasPrefix(gjson.Get(b, "id").String(), "resp_b_") ||
			!slices.Equal(store.called()[calls:], []string{"a", "b"}) {
			t.Fatalf("%d %s; upstream calls %q, want a's not-found, then b's answer", resp.StatusCode, b, store.called()[calls:])
		}
		detail := e.MustAPI("GET", fmt.Sprintf("/api/requests/%v", loggedRow(e, resp)["id"]), nil, 200)
		var steps []string
		for _, st := range detail["attempts"].([]any) {
			s := st.(map[string]any)
			steps = append(steps, fmt.Sprint(s["connection_id"], " ", s["kind"], " ", s["status"], " ", s["reason"]))
		}
		if want := []string{fmt.Sprint(connA, " first 400 stored_state_not_found"), fmt.Sprint(connB, " failover 200 ")}; !slices.Equal(steps, want) {
			t.Fatalf("attempts %q, want %q", steps, want)
		}
		// Learned: the next turns go to b at once, on the id named and on the answer's own.
		next := gjson.Get(b, "id").String()
		for _, prev := range []string{"resp_b_elsewhere", next} {
			calls = len(store.called())
			resp, b = post(`{"model":"multi/gpt-5","previous_response_id":"` + prev + `","input":"Once more."}`)
			if resp.StatusCode != 200 || !slices.Equal(store.called()[calls:], []string{"b"}) {
				t.Fatalf("after %s: %d %s, upstream calls %q; want b at once", prev, resp.StatusCode, b, store.called()[calls:])
			}
		}
	})

	// The organisation that holds the conversation is rate-limited: the other one says "not
	// found", and the client is told to wait for the one that holds it (429, Retry-After), not
	// that its conversation is gone.
	t.Run("the holder rests", func(t *testing.T) {
		store.put("b", "resp_b_holder")
		post := func() *http.Response {
			resp := e.Post(ctx, "/v1/responses", key, `{"model":"multi/gpt-5","previous_response_id":"resp_b_holder","input":"Next."}`, nil)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp
		}
		if resp := post(); resp.StatusCode != 200 { // a's not-found, b's answer: b holds it
			t.Fatalf("first: %d", resp.StatusCode)
		}
		store.mu.Lock()
		store.busy["b"] = 1
		store.mu.Unlock()
		calls := len(store.called())
		resp := post()
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "20" || !slices.Equal(store.called()[calls:], []string{"b", "a"}) {
			t.Fatalf("holder rate-limited: %d Retry-After %q, upstream calls %q; want 429 after 20 s, b then a",
				resp.StatusCode, resp.Header.Get("Retry-After"), store.called()[calls:])
		}
		e.Clock.Advance(21 * time.Second)
		calls = len(store.called())
		if resp := post(); resp.StatusCode != 200 || !slices.Equal(store.called()[calls:], []string{"b"}) {
			t.Fatalf("after the wait: %d, upstream calls %q; want b at once", resp.StatusCode, store.called()[calls:])
		}
	})

	// The pins are kept in the store: after a restart the holder still goes first.
	t.Run("after a restart", func(t *testing.T) {
		e.Restart()
		client = openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
		calls := len(store.called())
		resp := e.Post(ctx, "/v1/responses", key, `{"model":"multi/gpt-5","previous_response_id":"resp_b_holder","input":"Back."}`, nil)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !slices.Equal(store.called()[calls:], []string{"b"}) {
			t.Fatalf("%d, upstream calls %q; want b at once", resp.StatusCode, store.called()[calls:])
		}
	})

	// State no organisation holds: the client gets the upstream's answer, and neither connection
	// nor the model is held against it.
	t.Run("nowhere", func(t *testing.T) {
		_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "multi/gpt-5", PreviousResponseID: openai.String("resp_gone"),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hm?")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "Previous response with id 'resp_gone' not found.") {
			t.Fatalf("got %v, want the upstream's 400 previous_response_not_found", err)
		}
		resp := e.Post(ctx, "/v1/responses", key, `{"model":"multi/gpt-5","input":[{"type":"item_reference","id":"rs_gone"}]}`, nil)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || !strings.Contains(string(b), "Item with id 'rs_gone' not found") {
			t.Fatalf("item nowhere: %d %s", resp.StatusCode, b)
		}
		for _, id := range []int64{connA, connB} {
			if st := e.State(id); st.Status != "active" || st.BackoffLevel != 0 || st.RemainingMS != 0 {
				t.Errorf("connection %d after the not-found answers: %+v", id, st)
			}
		}
		if cds := e.ModelCooldowns(); len(cds) != 0 {
			t.Errorf("model lockouts after the not-found answers: %v", cds)
		}
		// Both still serve.
		for range 2 {
			send(false, responses.ResponseNewParams{Model: "multi/gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Still there?")}})
		}
	})

	// Through a combo whose next target speaks chat completions, which cannot carry a
	// previous_response_id: the client still learns that the response was not found, not that
	// the last target could not take the field.
	t.Run("nowhere, through a combo", func(t *testing.T) {
		e.AddProvider("plain", up.URL+"/v1")
		e.AddConnection("plain", "main", "sk-plain", 0)
		e.MustAPI("POST", "/api/combos", map[string]any{"name": "stateful", "targets": []map[string]any{
			{"provider": "multi", "model": "gpt-5"}, {"provider": "plain", "model": "gpt-5"}}}, 201)
		_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "stateful", PreviousResponseID: openai.String("resp_gone"),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hm?")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "Previous response with id 'resp_gone' not found.") {
			t.Fatalf("got %v, want the upstream's 400 previous_response_not_found", err)
		}
		// The route names the target whose answer it is.
		if route := apiErr.Response.Header.Get("X-Switchyard-Route"); !strings.Contains(route, "target=multi/gpt-5;") {
			t.Errorf("route %q", route)
		}
		// An earlier answer by item_reference likewise: the chat target cannot take it either.
		resp := e.Post(ctx, "/v1/responses", key, `{"model":"stateful","input":[{"type":"item_reference","id":"rs_gone"}]}`, nil)
		if b := testenv.ReadAll(t, resp); resp.StatusCode != 404 || !strings.Contains(b, "Item with id 'rs_gone' not found") {
			t.Fatalf("item nowhere, through the combo: %d %s", resp.StatusCode, b)
		}
	})
}

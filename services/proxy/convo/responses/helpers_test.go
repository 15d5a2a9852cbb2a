package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
)

// files are the inputs of a testdata directory with an extension.
func files(t testing.TB, dir, ext string) []string {
	t.Helper()
	list, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(list) == 0 {
		t.Fatalf("no cases in testdata/%s", dir)
	}
	return list
}

// mustRead reads a request that must read.
func mustRead(t testing.TB, body string) *convo.Request {
	t.Helper()
	r, err := ReadRequest([]byte(body))
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	return r
}

// mustReadAnswer reads an answer that must read.
func mustReadAnswer(t testing.TB, body []byte) []convo.Event {
	t.Helper()
	evs, err := ReadAnswer(nil, body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	return evs
}

// dumpEvents writes events one a line, texts unescaped, for golden files and messages.
func dumpEvents(evs []convo.Event) []byte {
	var b bytes.Buffer
	names := [...]string{"start", "block_start", "delta", "signature", "block_stop", "usage", "stop", "end", "error"}
	blocks := [...]string{"text", "thinking", "redacted_thinking", "tool_call"}
	for _, e := range evs {
		b.WriteString(names[e.Kind])
		switch e.Kind {
		case convo.EvStart:
			fmt.Fprintf(&b, " id=%q model=%q", e.ID, e.Model)
		case convo.EvBlockStart:
			fmt.Fprintf(&b, " %d %s", e.Index, blocks[e.Block])
			if e.ID != "" || e.Name != "" || e.Namespace != "" {
				fmt.Fprintf(&b, " id=%q name=%q namespace=%q", e.ID, e.Name, e.Namespace)
			}
		case convo.EvDelta:
			fmt.Fprintf(&b, " %d %q", e.Index, e.Text.String())
		case convo.EvSignature:
			fmt.Fprintf(&b, " %d %q", e.Index, string(e.Text))
		case convo.EvBlockStop:
			fmt.Fprintf(&b, " %d", e.Index)
		case convo.EvUsage:
			u := e.Usage
			fmt.Fprintf(&b, " input=%d output=%d cache_read=%d cache_write=%d reasoning=%d has=%05b", u.Input, u.Output, u.CacheRead, u.CacheWrite, u.Reasoning, u.Has)
		case convo.EvStop:
			stops := [...]string{"unset", "end", "max_tokens", "tool_use", "stop_sequence", "content_filter", "refusal", "pause"}
			fmt.Fprintf(&b, " %s", stops[e.Stop])
		case convo.EvError:
			fmt.Fprintf(&b, " type=%q code=%q message=%q param=%q", e.Err.Type, e.Err.Code, e.Err.Message, e.Err.Param)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// dumpRequest writes a request of the model as indented JSON with its texts unescaped, for
// golden files and messages.
func dumpRequest(t testing.TB, r *convo.Request) []byte {
	t.Helper()
	raw := func(b []byte) json.RawMessage {
		if b == nil {
			return nil
		}
		return b
	}
	var parts func(ps []convo.Part) []map[string]any
	parts = func(ps []convo.Part) []map[string]any {
		var out []map[string]any
		for _, p := range ps {
			m := map[string]any{"kind": [...]string{"text", "image", "document", "tool_call", "tool_result", "thinking"}[p.Kind]}
			set := func(k string, v any, ok bool) {
				if ok {
					m[k] = v
				}
			}
			set("text", p.Text.String(), p.Text != "")
			set("url", p.URL, p.URL != "")
			set("media_type", p.MediaType, p.MediaType != "")
			set("data", p.Data, p.Data != "")
			set("detail", p.Detail, p.Detail != "")
			set("title", p.Title, p.Title != "")
			set("id", p.ID, p.ID != "")
			set("name", p.Name, p.Name != "")
			set("namespace", p.Namespace, p.Namespace != "")
			set("args", raw(p.Args), p.Args != nil)
			set("content", parts(p.Content), p.Content != nil)
			set("is_error", p.IsError, p.IsError)
			set("signature", p.Signature, p.Signature != "")
			set("encrypted", p.Encrypted, p.Encrypted != "")
			set("redacted", p.Redacted, p.Redacted)
			set("cache", raw(p.Cache), p.Cache != nil)
			out = append(out, m)
		}
		return out
	}
	var tools func(ts []convo.Tool) []map[string]any
	tools = func(ts []convo.Tool) []map[string]any {
		var out []map[string]any
		for _, t := range ts {
			m := map[string]any{"kind": [...]string{"function", "namespace", "server"}[t.Kind], "name": t.Name}
			if t.Description != "" {
				m["description"] = t.Description
			}
			if t.Parameters != nil {
				m["parameters"] = raw(t.Parameters)
			}
			if t.Strict != nil {
				m["strict"] = *t.Strict
			}
			if t.Tools != nil {
				m["tools"] = tools(t.Tools)
			}
			if t.Type != "" {
				m["type"], m["family"], m["raw"] = t.Type, t.Family, raw(t.Raw)
			}
			out = append(out, m)
		}
		return out
	}
	var msgs []map[string]any
	for _, m := range r.Messages {
		x := map[string]any{"role": [...]string{"user", "assistant", "system", "tool"}[m.Role], "parts": parts(m.Parts)}
		if m.Name != "" {
			x["name"] = m.Name
		}
		msgs = append(msgs, x)
	}
	out := map[string]any{"model": r.Model, "system": parts(r.System), "messages": msgs, "tools": tools(r.Tools),
		"tool_choice":         map[string]any{"mode": [...]string{"unset", "auto", "none", "any", "tool"}[r.ToolChoice.Mode], "name": r.ToolChoice.Name},
		"parallel_tool_calls": r.ParallelToolCalls, "max_tokens": r.MaxTokens, "temperature": r.Temperature, "top_p": r.TopP,
		"top_k": r.TopK, "stop": r.Stop, "reasoning_effort": r.ReasoningEffort, "thinking_budget": r.ThinkingBudget,
		"reasoning_summary": r.ReasoningSummary, "user": r.User, "metadata": raw(r.Metadata), "stream": r.Stream,
		"include_usage": r.IncludeUsage, "store": r.Store, "previous_response_id": r.PreviousResponseID,
		"truncation": r.Truncation, "service_tier": r.ServiceTier, "include": r.Include, "dropped": r.Dropped}
	if f := r.Format; f != nil {
		out["format"] = map[string]any{"kind": [...]string{"text", "json_object", "json_schema"}[f.Kind], "name": f.Name,
			"schema": raw(f.Schema), "strict": f.Strict, "description": f.Description}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// oneLine is s without its line breaks, for messages.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

package chat

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

var blockNames = map[convo.BlockKind]string{convo.BlockText: "text", convo.BlockThinking: "thinking",
	convo.BlockRedactedThinking: "redacted_thinking", convo.BlockToolCall: "tool_call"}

var stopNames = map[convo.StopReason]string{convo.StopUnset: "unset", convo.StopEnd: "end", convo.StopMaxTokens: "max_tokens",
	convo.StopToolUse: "tool_use", convo.StopSequence: "stop_sequence", convo.StopContentFilter: "content_filter",
	convo.StopRefusal: "refusal", convo.StopPause: "pause"}

// dump writes events one a line, for goldens a reviewer can read.
func dump(evs []convo.Event) []byte {
	var b strings.Builder
	for _, e := range evs {
		switch e.Kind {
		case convo.EvStart:
			fmt.Fprintf(&b, "start id=%q model=%q\n", e.ID, e.Model)
		case convo.EvBlockStart:
			fmt.Fprintf(&b, "block_start %d %s", e.Index, blockNames[e.Block])
			if e.Block == convo.BlockToolCall {
				fmt.Fprintf(&b, " id=%q name=%q", e.ID, e.Name)
			}
			b.WriteByte('\n')
		case convo.EvDelta:
			fmt.Fprintf(&b, "delta %d \"%s\"\n", e.Index, string(e.Text)) // as it stands: escaped
		case convo.EvSignature:
			fmt.Fprintf(&b, "signature %d \"%s\"\n", e.Index, string(e.Text))
		case convo.EvBlockStop:
			fmt.Fprintf(&b, "block_stop %d\n", e.Index)
		case convo.EvUsage:
			u := e.Usage
			var has []string
			for bit, n := range map[convo.UsageFields]string{convo.HasInput: "input", convo.HasOutput: "output",
				convo.HasCacheRead: "cache_read", convo.HasCacheWrite: "cache_write", convo.HasReasoning: "reasoning"} {
				if u.Has&bit != 0 {
					has = append(has, n)
				}
			}
			slices.Sort(has)
			fmt.Fprintf(&b, "usage input=%d output=%d cache_read=%d cache_write=%d reasoning=%d has=%s\n",
				u.Input, u.Output, u.CacheRead, u.CacheWrite, u.Reasoning, strings.Join(has, ","))
		case convo.EvStop:
			fmt.Fprintf(&b, "stop %s\n", stopNames[e.Stop])
		case convo.EvEnd:
			b.WriteString("end\n")
		case convo.EvError:
			fmt.Fprintf(&b, "error type=%q code=%q message=%q param=%q\n", e.Err.Type, e.Err.Code, e.Err.Message, e.Err.Param)
		}
	}
	return []byte(b.String())
}

// writeStream writes events with a fresh writer for request r.
func writeStream(r *convo.Request, evs []convo.Event) []byte {
	return convotest.Write(NewStreamWriter(r, 1700000000), nil, evs)
}

// accumulated is what a chat client builds from a stream (as the OpenAI SDKs' accumulators do)
// or reads from a whole answer.
type accumulated struct {
	ID, Model string
	Role      string
	Content   string
	Reasoning string
	Calls     []accCall
	Finish    string
	Usage     map[string]any
	Error     map[string]any
	Done      bool
}

type accCall struct {
	Index          int
	ID, Name, Args string
	ArgsJSON       any `json:",omitempty"`
	Type           string
	// FirstHadNameID: the call's first fragment named it (what clients need to start a call).
	FirstHadNameID bool
}

// accumulate reads a chat stream as a client does; it fails the test when an event is not a data
// line with JSON (or [DONE]) or anything follows [DONE] or an error.
func accumulate(t *testing.T, doc []byte) accumulated {
	t.Helper()
	var a accumulated
	var seen []bool // per call: a fragment was read
	ended := false
	for _, ev := range convotest.SplitEvents(doc) {
		if ended {
			t.Fatalf("an event after the end: %q", ev)
		}
		_, data := convo.ParseEvent(ev)
		if string(data) == "[DONE]" {
			a.Done, ended = true, true
			continue
		}
		var c struct {
			ID, Model string
			Object    string
			Created   int64
			Choices   []struct {
				Index int
				Delta struct {
					Role             string
					Content          *string
					ReasoningContent *string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int
						ID, Type string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason *string `json:"finish_reason"`
			}
			Usage map[string]any
			Error map[string]any
		}
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("chunk is not a chat chunk: %v\n%s", err, ev)
		}
		if c.Error != nil {
			for k, v := range c.Error {
				if v == nil {
					delete(c.Error, k) // a null param is no param
				}
			}
			a.Error, ended = c.Error, true
			continue
		}
		if c.Object != "chat.completion.chunk" {
			t.Fatalf("object %q in %s", c.Object, ev)
		}
		a.ID, a.Model = c.ID, c.Model
		if c.Usage != nil {
			a.Usage = c.Usage
		}
		for _, ch := range c.Choices {
			d := ch.Delta
			if d.Role != "" {
				a.Role = d.Role
			}
			if d.Content != nil {
				a.Content += *d.Content
			}
			if d.ReasoningContent != nil {
				a.Reasoning += *d.ReasoningContent
			}
			for _, tc := range d.ToolCalls {
				for len(a.Calls) <= tc.Index {
					a.Calls = append(a.Calls, accCall{Index: len(a.Calls)})
					seen = append(seen, false)
				}
				ac := &a.Calls[tc.Index]
				if !seen[tc.Index] {
					seen[tc.Index] = true
					ac.FirstHadNameID = tc.ID != "" && tc.Function.Name != ""
				}
				if tc.ID != "" {
					ac.ID = tc.ID
				}
				if tc.Type != "" {
					ac.Type = tc.Type
				}
				ac.Name += tc.Function.Name
				ac.Args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				a.Finish = *ch.FinishReason
			}
		}
	}
	for i := range a.Calls {
		var v any
		if json.Unmarshal([]byte(a.Calls[i].Args), &v) == nil {
			a.Calls[i].ArgsJSON = v
		}
	}
	return a
}

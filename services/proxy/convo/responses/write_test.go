package responses

import (
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// The writers' goldens in testdata/client are translate's (responses_answer, responses_stream):
// what Responses clients get today. The event sequences below are what a chat upstream's answers
// of those goldens are in the model, so the writers must write them byte for byte.

func start(id, model string) convo.Event {
	return convo.Event{Kind: convo.EvStart, ID: id, Model: model}
}

func blockStart(i int, k convo.BlockKind) convo.Event {
	return convo.Event{Kind: convo.EvBlockStart, Index: i, Block: k}
}

func callStart(i int, id, name string) convo.Event {
	return convo.Event{Kind: convo.EvBlockStart, Index: i, Block: convo.BlockToolCall, ID: id, Name: name}
}

func delta(i int, t convo.Text) convo.Event {
	return convo.Event{Kind: convo.EvDelta, Index: i, Text: t}
}

func blockStop(i int) convo.Event { return convo.Event{Kind: convo.EvBlockStop, Index: i} }

func usage(in, out, cached int64) convo.Event {
	u := convo.Usage{Input: in, Output: out, CacheRead: cached, Has: convo.HasInput | convo.HasOutput}
	if cached > 0 {
		u.Has |= convo.HasCacheRead
	}
	return convo.Event{Kind: convo.EvUsage, Usage: u}
}

func stop(s convo.StopReason) convo.Event { return convo.Event{Kind: convo.EvStop, Stop: s} }

var end = convo.Event{Kind: convo.EvEnd}

// writeStream runs events through a stream writer and ends it the way the engine does when the
// upstream's stream ends (Abort, a no-op after the terminal event).
func writeStream(r *convo.Request, evs []convo.Event) []byte {
	w := NewStreamWriter(r, 1700000000)
	return w.Abort(convotest.Write(w, nil, evs), "stream_incomplete", "the upstream stream ended before it was complete")
}

func TestAppendAnswerWritesTodaysAnswers(t *testing.T) {
	echo := mustRead(t, `{"instructions":"Be brief.","store":false}`)
	for _, c := range []struct {
		golden  string
		created int64
		evs     []convo.Event
	}{
		{"answer_length", 1, []convo.Event{start("chatcmpl-2", "gpt-x"), blockStart(0, convo.BlockText),
			delta(0, "Once upon a"), blockStop(0), usage(5, 3, 0), stop(convo.StopMaxTokens), end}},
		{"answer_text_tools_reasoning", 1700000000, []convo.Event{start("chatcmpl-9XYZ", "gpt-x"),
			blockStart(0, convo.BlockThinking), delta(0, "Need both cities."), blockStop(0),
			blockStart(1, convo.BlockText), delta(1, "Checking the weather."), blockStop(1),
			callStart(2, "call_1", "get_weather"), delta(2, `{\"city\":\"Paris\"}`), blockStop(2),
			callStart(3, "call_2", "get_weather"), delta(3, "not json"), blockStop(3),
			usage(150, 50, 30), stop(convo.StopToolUse), end}},
	} {
		t.Run(c.golden, func(t *testing.T) {
			out, err := AppendAnswer(nil, echo, c.evs, c.created)
			if err != nil {
				t.Fatal(err)
			}
			convotest.Golden(t, "testdata/client/"+c.golden+".golden", convotest.Indent(t, out))
		})
	}
}

func TestStreamWriterWritesTodaysStreams(t *testing.T) {
	for _, c := range []struct {
		golden string
		evs    []convo.Event
	}{
		{"stream_reasoning_text_tools", []convo.Event{start("chatcmpl-1", "gpt-x"),
			blockStart(0, convo.BlockThinking), delta(0, "Two "), delta(0, "cities."), blockStop(0),
			blockStart(1, convo.BlockText), delta(1, "Checking"), delta(1, " both."), blockStop(1),
			callStart(2, "call_1", "get_weather"), delta(2, `{\"city\":\"Paris\"}`), blockStop(2),
			callStart(3, "call_2", "get_weather"), delta(3, `{\"city\":`), delta(3, `\"Rome\"}`), blockStop(3),
			stop(convo.StopToolUse), usage(30, 42, 5), end}},
		{"stream_error", []convo.Event{start("chatcmpl-2", "gpt-x"), blockStart(0, convo.BlockText), delta(0, "Hel"),
			{Kind: convo.EvError, Err: &convo.Error{Type: "server_error", Code: "overloaded", Message: "upstream overloaded"}}}},
	} {
		t.Run(c.golden, func(t *testing.T) {
			convotest.Golden(t, "testdata/client/"+c.golden+".golden", writeStream(&convo.Request{}, c.evs))
		})
	}
}

package proxy

import (
	"fmt"
	"strings"
	"testing"
)

// benchStream is a stream of format f as the bench's upstreams send it: the opening events, 20
// text deltas and the closing ones, usage last.
func benchStream(f Format) [][]byte {
	var evs []string
	named := func(name, data string) { evs = append(evs, "event: "+name+"\ndata: "+data+"\n\n") }
	switch f {
	case FormatChat:
		for i := range 20 {
			evs = append(evs, fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"word%d "},"finish_reason":null}]}`+"\n\n", i))
		}
		evs = append(evs, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":120,"total_tokens":151}}`+"\n\n", "data: [DONE]\n\n")
	case FormatMessages:
		named("message_start", `{"type":"message_start","message":{"id":"msg","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":31,"output_tokens":1}}}`)
		named("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		for i := range 20 {
			named("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word%d "}}`, i))
		}
		named("content_block_stop", `{"type":"content_block_stop","index":0}`)
		named("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":120}}`)
		named("message_stop", `{"type":"message_stop"}`)
	default:
		seq := 0
		ev := func(typ, fields string) {
			named(typ, fmt.Sprintf(`{"type":%q,"sequence_number":%d,%s}`, typ, seq, fields))
			seq++
		}
		resp := func(status, usage string) string {
			return `"response":{"id":"resp","object":"response","created_at":1700000000,"status":"` + status +
				`","model":"m","output":[],"usage":` + usage + `}`
		}
		item := `"item_id":"msg","output_index":0,"content_index":0`
		ev("response.created", resp("in_progress", "null"))
		ev("response.in_progress", resp("in_progress", "null"))
		ev("response.output_item.added", `"output_index":0,"item":{"type":"message","id":"msg","status":"in_progress","role":"assistant","content":[]}`)
		ev("response.content_part.added", item+`,"part":{"type":"output_text","annotations":[],"text":""}`)
		for i := range 20 {
			ev("response.output_text.delta", item+fmt.Sprintf(`,"delta":"word%d ","logprobs":[]`, i))
		}
		ev("response.output_text.done", item+`,"text":"`+strings.Repeat("word ", 20)+`","logprobs":[]`)
		ev("response.output_item.done", `"output_index":0,"item":{"type":"message","id":"msg","status":"completed","role":"assistant","content":[]}`)
		ev("response.completed", resp("completed", `{"input_tokens":31,"output_tokens":120,"total_tokens":151}`))
	}
	out := make([][]byte, len(evs))
	for i, e := range evs {
		out[i] = []byte(e)
	}
	return out
}

// BenchmarkPassthroughStream: what the gateway does with each event of a stream it passes through
// (no translation), apart from reading and writing it: the look at the event (the watchdog's
// classification, the error check, whether it carries usage), the usage read and the relay's own
// work. One op is one whole stream.
func BenchmarkPassthroughStream(b *testing.B) {
	for f, name := range []string{FormatChat: "chat", FormatMessages: "messages", FormatResponses: "responses"} {
		f := Format(f)
		b.Run(name, func(b *testing.B) {
			evs := benchStream(f)
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				r := (&call{src: f, dst: f}).relay()
				var u usageSeen
				for _, ev := range evs {
					l := lookEvent(f, ev)
					if l.scrub {
						b.Fatal("an error event")
					}
					if l.usage {
						u.observe(ev)
					}
					out = r.Event(out[:0], ev, l)
				}
				if !r.Done() {
					b.Fatal("the stream did not end")
				}
			}
		})
	}
}

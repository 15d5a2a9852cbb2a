package proxy

import (
	"strings"
	"testing"

	"switchyard/services/spend"
)

func TestUsageSeenEveryFormat(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []string
		want   spend.Usage
	}{
		{"chat answer with cache and reasoning", []string{`{"id":"x","usage":{"prompt_tokens":1200,"completion_tokens":300,` +
			`"prompt_tokens_details":{"cached_tokens":1000},"completion_tokens_details":{"reasoning_tokens":200}}}`},
			spend.Usage{Input: 1200, Output: 300, CacheRead: 1000, Reasoning: 200}},
		{"chat stream: usage on the last chunk only", []string{
			`data: {"choices":[{"delta":{"content":"hi"}}],"usage":null}`,
			`data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2}}`},
			spend.Usage{Input: 10, Output: 2}},
		{"messages answer: input apart from the cache", []string{`{"type":"message","usage":{"input_tokens":50,` +
			`"cache_creation_input_tokens":2000,"cache_read_input_tokens":3000,"output_tokens":70}}`},
			spend.Usage{Input: 5050, Output: 70, CacheRead: 3000, CacheWrite: 2000}},
		{"messages stream: input at the start, output at the end", []string{
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":40,\"cache_read_input_tokens\":900,\"output_tokens\":1}}}",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"\\\"usage\\\":{\"}}",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":120}}"},
			spend.Usage{Input: 940, Output: 120, CacheRead: 900}},
		{"responses stream: the completed response", []string{
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}",
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":500," +
				"\"input_tokens_details\":{\"cached_tokens\":100},\"output_tokens\":900,\"output_tokens_details\":{\"reasoning_tokens\":800},\"total_tokens\":1400}}}"},
			spend.Usage{Input: 500, Output: 900, CacheRead: 100, Reasoning: 800}},
		{"the last of several usage objects counts", []string{`{"tool":{"usage":{"prompt_tokens":1,"completion_tokens":1}},` +
			`"choices":[{"usage":{"prompt_tokens":2}}],"usage":{"prompt_tokens":30,"completion_tokens":4,"prompt_tokens":99}}`},
			spend.Usage{Input: 30, Output: 4}},
		{"a last usage of null counts as none", []string{`{"x":{"usage":{"prompt_tokens":1}},"usage":null}`}, spend.Usage{}},
		{"no usage at all", []string{`{"id":"x","choices":[]}`}, spend.Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s usageSeen
			for _, ev := range tc.events {
				s.observe([]byte(ev))
			}
			if got := s.usage(); got != tc.want {
				t.Fatalf("usage %+v, want %+v", got, tc.want)
			}
		})
	}
}

func BenchmarkUsageObserveEvent(b *testing.B) {
	ev := []byte("data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello there\"}}]}\n\n")
	var s usageSeen
	b.ReportAllocs()
	for b.Loop() {
		s.observe(ev)
	}
}

// BenchmarkUsageObserveAnswer reads the usage of whole answers as upstreams send them.
func BenchmarkUsageObserveAnswer(b *testing.B) {
	for _, tc := range []struct{ name, doc string }{
		{"chat", `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_1"}`},
		{"messages", `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello!"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":6,"service_tier":"standard"}}`},
		{"responses", `{"id":"resp_1","object":"response","status":"completed","model":"gpt-5","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello!","annotations":[]}]}],"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":6,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":18}}`},
		// A long answer: the JSON frame around 10 KB of text, as the bench's json-large upstream sends.
		{"chat-10KB", `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"` +
			strings.Repeat("lorem ipsum dolor sit amet ", 380) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":120,"total_tokens":151}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			doc := []byte(tc.doc)
			b.ReportAllocs()
			for b.Loop() {
				var s usageSeen
				s.observe(doc)
			}
		})
	}
}

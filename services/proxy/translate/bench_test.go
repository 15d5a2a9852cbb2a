package translate

import (
	"os"
	"strings"
	"testing"
)

// Benchmarks of the answer translators on a 10 KB answer, the size the gateway benchmark uses.

var bigText = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 225)

var bigMessage = []byte(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"` + bigText +
	`"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":2000}}`)

var bigChat = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"` + bigText +
	`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2000,"total_tokens":2010}}`)

func BenchmarkMessagesResponseToChat(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MessagesResponseToChat(bigMessage, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChatResponseToMessages(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ChatResponseToMessages(bigChat); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChatResponseToResponses(b *testing.B) {
	echo := EchoOf(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ChatResponseToResponses(bigChat, echo); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChatStreamToResponsesFirstChunk(b *testing.B) {
	ev := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}` + "\n\n")
	echo := EchoOf(nil)
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		s := &ChatToResponsesStream{Echo: echo}
		out = s.Event(out[:0], ev)
	}
}

func BenchmarkMessagesStreamToChatDelta(b *testing.B) {
	ev := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there\"}}\n\n")
	s := &MessagesToChatStream{}
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		out = s.Event(out[:0], ev)
	}
}

func BenchmarkScanAnswer(b *testing.B) {
	s := string(bigChat)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if !document(s, nil) {
			b.Fatal("invalid")
		}
	}
}

var smallResponsesRequest = []byte(`{"model":"gpt-x","instructions":"You are a concise assistant.",` +
	`"input":[{"role":"user","content":"Summarise the benefits of connection pooling in one short paragraph."}],"temperature":0.2,"store":false}`)

func BenchmarkResponsesRequestToChat(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ResponsesToChatEcho(smallResponsesRequest, Target{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCodexRequestToChat(b *testing.B) {
	body, err := os.ReadFile("testdata/responses_request/codex.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ResponsesToChatEcho(body, Target{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChatStreamToResponsesDelta(b *testing.B) {
	ev := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"content":"c07 lorem ipsum "},"finish_reason":null}]}` + "\n\n")
	s := &ChatToResponsesStream{Echo: EchoOf(nil)}
	var out []byte
	out = s.Event(out, ev)
	b.ReportAllocs()
	for b.Loop() {
		out = s.Event(out[:0], ev)
	}
}

func BenchmarkChatStreamToMessagesDelta(b *testing.B) {
	ev := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"content":"c07 lorem ipsum "},"finish_reason":null}]}` + "\n\n")
	s := NewChatToMessagesStream()
	var out []byte
	out = s.Event(out, ev)
	b.ReportAllocs()
	for b.Loop() {
		out = s.Event(out[:0], ev)
	}
}

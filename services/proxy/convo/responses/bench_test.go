package responses

import (
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// Benchmarks beside translate's (BenchmarkResponsesRequestToChat, BenchmarkCodexRequestToChat,
// BenchmarkChatResponseToResponses, BenchmarkChatStreamToResponses…), on the same inputs where
// they exist: a 10 KB answer, the size the gateway benchmark uses, a small request and Codex's.

var bigText = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 225)

// bigAnswer is a 10 KB Responses answer of an upstream.
var bigAnswer = []byte(`{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-5-codex","output":[` +
	`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"` + bigText +
	`"}]}],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":2000,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2010}}`)

var smallRequest = []byte(`{"model":"gpt-x","instructions":"You are a concise assistant.",` +
	`"input":[{"role":"user","content":"Summarise the benefits of connection pooling in one short paragraph."}],"temperature":0.2,"store":false}`)

func BenchmarkReadRequestSmall(b *testing.B) { convotest.BenchRead(b, ReadRequest, smallRequest) }

func BenchmarkReadRequestCodex(b *testing.B) {
	convotest.BenchRead(b, ReadRequest, convotest.Read(b, "testdata/request/codex.json"))
}

func BenchmarkReadRequestCodexCLI(b *testing.B) {
	convotest.BenchRead(b, ReadRequest, convotest.Read(b, "testdata/request/codex_cli.json"))
}

func BenchmarkAppendRequestCodexCLI(b *testing.B) {
	r, err := ReadRequest(convotest.Read(b, "testdata/request/codex_cli.json"))
	if err != nil {
		b.Fatal(err)
	}
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		out, _ = AppendRequest(out[:0], r, convo.Target{})
	}
	b.SetBytes(int64(len(out)))
}

func BenchmarkAppendRequestClaudeCode(b *testing.B) {
	r := claudeCodeRequest()
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		out, _ = AppendRequest(out[:0], r, convo.Target{})
	}
}

func BenchmarkReadAnswer(b *testing.B) { convotest.BenchReadAnswer(b, ReadAnswer, bigAnswer) }

// BenchmarkAppendAnswer writes a 10 KB answer for a client (translate's
// BenchmarkChatResponseToResponses reads and writes it).
func BenchmarkAppendAnswer(b *testing.B) {
	evs := []convo.Event{start("chatcmpl-1", "gpt-x"), blockStart(0, convo.BlockText), delta(0, convo.Text(bigText)), blockStop(0),
		usage(10, 2000, 0), stop(convo.StopEnd), end}
	convotest.BenchAppendAnswer(b, AppendAnswer, &convo.Request{}, evs)
}

// BenchmarkAnswerResponsesToResponses reads an upstream's 10 KB answer and writes it for a
// client.
func BenchmarkAnswerResponsesToResponses(b *testing.B) {
	convotest.BenchAnswerThrough(b, ReadAnswer, AppendAnswer, &convo.Request{}, bigAnswer)
}

func BenchmarkStreamWriterFirstChunk(b *testing.B) {
	evs := []convo.Event{start("chatcmpl-1", "gpt-x"), blockStart(0, convo.BlockText), delta(0, "Hello")}
	r := &convo.Request{}
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		out = convotest.Write(NewStreamWriter(r, 1), out[:0], evs)
	}
}

func BenchmarkStreamWriterDelta(b *testing.B) {
	w := NewStreamWriter(&convo.Request{}, 1)
	var out []byte
	for _, e := range []convo.Event{start("chatcmpl-1", "gpt-x"), blockStart(0, convo.BlockText)} {
		out = w.Write(out, &e)
	}
	e := delta(0, "c07 lorem ipsum ")
	b.ReportAllocs()
	for b.Loop() {
		out = w.Write(out[:0], &e)
	}
}

// streamOpening is an upstream stream's first events, up to the message its deltas go into;
// textDelta is one delta of that message.
var (
	streamOpening = []byte("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"model\":\"m\"},\"sequence_number\":0}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"},\"sequence_number\":1}\n\n")
	textDelta = []byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"c07 lorem ipsum \",\"logprobs\":[],\"obfuscation\":\"Xq\",\"sequence_number\":7}\n\n")
)

func BenchmarkStreamReaderDelta(b *testing.B) {
	r := NewStreamReader()
	evs := convotest.ReadStream(r, streamOpening)
	b.ReportAllocs()
	for b.Loop() {
		evs = r.Read(evs[:0], textDelta)
	}
}

// BenchmarkStreamResponsesToResponsesDelta: one upstream delta read and written for a client.
func BenchmarkStreamResponsesToResponsesDelta(b *testing.B) {
	r := NewStreamReader()
	w := NewStreamWriter(&convo.Request{}, 1)
	out := convotest.Relay(r, w, nil, streamOpening)
	var evs []convo.Event
	b.ReportAllocs()
	for b.Loop() {
		evs = r.Read(evs[:0], textDelta)
		out = convotest.Write(w, out[:0], evs)
	}
}

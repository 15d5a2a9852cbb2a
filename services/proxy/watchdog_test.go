package proxy

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/settings"
)

func tpConfig() watchConfig {
	return watchConfig{readiness: 80 * time.Second, idle: 600 * time.Second,
		tp: settings.ThroughputWatchdog{Enabled: true, WarmupMS: 30_000, WindowMS: 30_000, MinUsefulBytesPerSecond: 4, MinUsefulBytes: 1}}
}

// The readiness timeout runs from the headers to the first content; heartbeats and metadata do
// not stop it, reasoning does. Then the idle timeout runs between content events.
func TestWatchReadinessAndIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := watchConfig{readiness: 80 * time.Second, idle: 10 * time.Second}
	w := newWatch(cfg, t0)
	for s := 10; s < 80; s += 10 {
		w.observe(t0.Add(time.Duration(s)*time.Second), evMeta, 0) // pings
	}
	if k, next := w.check(t0.Add(79 * time.Second)); k != "" || !next.Equal(t0.Add(80*time.Second)) {
		t.Fatalf("before readiness: %q next %v", k, next)
	}
	if k, _ := w.check(t0.Add(80 * time.Second)); k != abortReadiness {
		t.Fatalf("heartbeats only: %q, want readiness", k)
	}

	w = newWatch(cfg, t0)
	w.observe(t0.Add(70*time.Second), evReasoning, 0)
	if k, next := w.check(t0.Add(79 * time.Second)); k != "" || !next.Equal(t0.Add(80*time.Second)) {
		t.Fatalf("reasoning is content, the idle clock runs from it: %q next %v", k, next)
	}
	w.observe(t0.Add(85*time.Second), evMeta, 0) // a ping does not reset the idle clock
	if k, _ := w.check(t0.Add(80 * time.Second)); k != abortIdle {
		t.Fatalf("idle after reasoning at 70 s: %q", k)
	}
	w.observe(t0.Add(79*time.Second), evText, 3)
	if k, next := w.check(t0.Add(80 * time.Second)); k != "" || !next.Equal(t0.Add(89*time.Second)) {
		t.Fatalf("text moved the idle deadline: %q next %v", k, next)
	}
}

// The throughput watchdog judges only after warm-up plus one full window, ignores metadata, and
// pauses for one window after each tool call or reasoning event.
func TestWatchThroughput(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

	// One useful byte a second: under 4 B/s, judged first at 60 s.
	w := newWatch(tpConfig(), t0)
	for s := 1; s <= 59; s++ {
		w.observe(at(float64(s)), evText, 1)
		if k, _ := w.check(at(float64(s))); k != "" {
			t.Fatalf("judged during warm-up at %d s: %q", s, k)
		}
	}
	if _, next := w.check(at(59.5)); !next.Equal(at(60)) {
		t.Fatalf("first judgement at %v, want 60 s", next.Sub(t0))
	}
	w.observe(at(60), evText, 1)
	if k, _ := w.check(at(60)); k != abortThroughput {
		t.Fatalf("1 B/s at 60 s: %q, want throughput", k)
	}

	// Ten bytes a second passes, and keeps passing.
	w = newWatch(tpConfig(), t0)
	for s := 1; s <= 200; s++ {
		w.observe(at(float64(s)), evText, 10)
		if k, _ := w.check(at(float64(s))); k != "" {
			t.Fatalf("10 B/s aborted at %d s: %q", s, k)
		}
	}

	// Heartbeats and usage events carry nothing useful: a stream of only those is judged at 60 s.
	w = newWatch(tpConfig(), t0)
	w.observe(at(1), evText, 1000) // the start, then only metadata
	for s := 2; s <= 59; s++ {
		w.observe(at(float64(s)), evMeta, 0)
	}
	if k, _ := w.check(at(60)); k != abortThroughput {
		t.Fatalf("metadata only: %q", k)
	}

	// Tool-call deltas at 50 s pause the judgement until 80 s; the slow text after them is
	// judged then.
	w = newWatch(tpConfig(), t0)
	for s := 1; s <= 49; s++ {
		w.observe(at(float64(s)), evText, 10)
	}
	w.observe(at(50), evTool, 0)
	for s := 51; s < 80; s++ {
		w.observe(at(float64(s)), evText, 1)
		if k, _ := w.check(at(float64(s))); k != "" {
			t.Fatalf("judged during tool calls at %d s: %q", s, k)
		}
	}
	if k, _ := w.check(at(80)); k != abortThroughput {
		t.Fatalf("slow after tool calls: %q", k)
	}
}

// The watchdog fires on the clock without any event: the attempt's context is cancelled once,
// the kind is kept, and a stopped watchdog never fires.
func TestWatchdogFiresOnTheClock(t *testing.T) {
	clk := clockwork.NewFakeClock()
	var aborted atomic.Int32
	d := startWatchdog(clk, FormatChat, watchConfig{readiness: 80 * time.Second, idle: 600 * time.Second}, func() { aborted.Add(1) })
	clk.Advance(60 * time.Second)
	d.observe(evText, 5)
	clk.Advance(30 * time.Second) // past readiness, but content came: the timer re-arms for idle
	clk.BlockUntil(1)             // the timer re-armed
	if aborted.Load() != 0 || d.firedKind() != "" {
		t.Fatalf("aborted %d %q", aborted.Load(), d.firedKind())
	}
	clk.Advance(569 * time.Second)
	clk.BlockUntil(1) // the timer re-armed
	if aborted.Load() != 0 {
		t.Fatal("fired before 600 s of silence")
	}
	clk.Advance(time.Second) // 600 s after the content
	waitFor(t, "the watchdog fired", func() bool { return aborted.Load() == 1 })
	if d.stop() != abortIdle {
		t.Fatalf("kind %q", d.firedKind())
	}

	d = startWatchdog(clk, FormatChat, watchConfig{readiness: time.Second}, func() { aborted.Add(1) })
	d.stop()
	clk.Advance(time.Hour)
	if aborted.Load() != 1 {
		t.Fatal("a stopped watchdog fired")
	}
}

// waitFor polls cond (a timer callback of the fake clock runs on its own goroutine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}

func TestReadinessGrowsForLargeAndReasoningRequests(t *testing.T) {
	st := settings.Streams{ReadinessTimeoutMS: 80_000, ReadinessMaxTimeoutMS: 180_000}
	for _, c := range []struct {
		n         int
		reasoning bool
		want      time.Duration
	}{
		{1 << 10, false, 80 * time.Second},
		{32 << 10, false, 80 * time.Second},
		{272 << 10, false, 130 * time.Second},
		{600 << 10, false, 180 * time.Second},
		{1 << 10, true, 180 * time.Second},
	} {
		if got := readinessFor(st, c.n, c.reasoning); got != c.want {
			t.Errorf("%d bytes, reasoning %v: %v, want %v", c.n, c.reasoning, got, c.want)
		}
	}
	for model, want := range map[string]bool{"o3-mini": true, "gpt-5-codex": true, "openai/o4-mini": true, "deepseek-r1": true,
		"deepseek-reasoner": true, "gpt-4o": false, "claude-sonnet-4-5": false, "m": false} {
		if reasoningModel(model) != want {
			t.Errorf("reasoningModel(%s) != %v", model, want)
		}
	}
	for body, want := range map[string]bool{
		`{"model":"m","thinking":{"type":"enabled","budget_tokens":2048}}`:       true,
		`{"model":"m","thinking":{"type":"disabled"}}`:                           false,
		`{"model":"m","reasoning_effort":"high"}`:                                true,
		`{"model":"m","reasoning_effort":"minimal"}`:                             false,
		`{"model":"m","reasoning":{"effort":"medium"}}`:                          true,
		`{"model":"m","messages":[{"content":"the \"thinking\":{ part"}]}`:       false,
		`{"model":"m","reasoning":{"effort":"minimal"}}`:                         false,
		`{"model":"m","reasoning":{"summary":"auto"}}`:                           true,
		`{"model":"m","reasoning_effort":null}`:                                  false,
		`{"model":"m","thinking":{"type":"adaptive"}}`:                           true,
		`{"model":"m","thinking":{"type":"disabled"},"reasoning_effort":"high"}`: true,
		// Marks in a message or a tool's schema are not the request's settings.
		`{"model":"m","messages":[{"role":"user","content":"set \"reasoning_effort\":\"high\""}],"tools":[{"input_schema":{"properties":{"reasoning":{"type":"object"}}}}]}`: false,
		`{"model":"m","thinking":{"type":"enabled"},"tools":[{"input_schema":{"properties":{"mode":{"type":"disabled"}}}}]}`:                                                 true,
	} {
		req, derr := DecodeRequest([]byte(body))
		if derr != nil {
			t.Fatalf("%s: %v", body, derr)
		}
		if req.Reasoning != want {
			t.Errorf("%s: Reasoning %v, want %v", body, req.Reasoning, want)
		}
	}
}

func TestClassifyEvents(t *testing.T) {
	for _, c := range []struct {
		f      Format
		ev     string
		kind   eventKind
		useful int
	}{
		{FormatChat, `data: {"choices":[{"delta":{"role":"assistant","content":""}}]}`, evMeta, 0},
		{FormatChat, `data: {"choices":[{"delta":{"content":"Hé\n\"x\" \u00e9\ud83d\ude00"}}]}`, evText, 14},
		{FormatChat, `data: {"choices":[{"delta":{"reasoning_content":"hmm"}}]}`, evReasoning, 0},
		{FormatChat, `data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"content\":\"x\"}"}}]}}]}`, evTool, 0},
		{FormatChat, `data: {"choices":[],"usage":{"prompt_tokens":3}}`, evMeta, 0},
		{FormatChat, `: keep-alive`, evMeta, 0},
		{FormatChat, `data: [DONE]`, evMeta, 0},
		{FormatMessages, "event: ping\ndata: {\"type\":\"ping\"}", evMeta, 0},
		{FormatMessages, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}", evText, 5},
		{FormatMessages, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"\"}}", evReasoning, 0},
		{FormatMessages, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\"}}", evTool, 0},
		{FormatMessages, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}", evTool, 0},
		{FormatMessages, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}", evMeta, 0},
		{FormatMessages, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":2}}", evMeta, 0},
		{FormatResponses, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"abc\"}", evText, 3},
		{FormatResponses, "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"x\"}", evReasoning, 0},
		{FormatResponses, "event: response.function_call_arguments.delta\ndata: {\"delta\":\"{\"}", evTool, 0},
		{FormatResponses, "event: response.in_progress\ndata: {}", evMeta, 0},
		// An upstream that names no event: its data's type tells.
		{FormatResponses, "data: {\"type\":\"response.output_text.delta\",\"delta\":\"ab\"}", evText, 2},
		{FormatResponses, "data: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"function_call\"}}", evTool, 0},
		{FormatMessages, "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hey\"}}", evText, 3},
		// The name decides, not a mention of another event in the data.
		{FormatResponses, "event: response.created\ndata: {\"response\":{\"instructions\":\"think with response.reasoning_summary_text.delta\"}}", evMeta, 0},
		{FormatMessages, "event: message_start\ndata: {\"message\":{\"model\":\"content_block_start \\\"thinking\"}}", evMeta, 0},
	} {
		l := lookEvent(c.f, []byte(c.ev))
		if k, n := l.kind, l.useful; k != c.kind || n != c.useful {
			t.Errorf("%s: %d/%d, want %d/%d", strings.SplitN(c.ev, "\n", 2)[0], k, n, c.kind, c.useful)
		}
	}
}

// The per-event cost of the watchdogs: looking at an event and noting it.
func BenchmarkWatchdogPerEvent(b *testing.B) {
	d := startWatchdog(clockwork.NewRealClock(), FormatChat, tpConfig(), func() {})
	defer d.stop()
	ev := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"lorem ipsum "},"finish_reason":null}]}` + "\n\n")
	b.ReportAllocs()
	for b.Loop() {
		l := lookEvent(FormatChat, ev)
		d.observe(l.kind, l.useful)
	}
}

// FuzzLookEvent: any event is looked at without a panic, and never counts more useful bytes than
// it has.
func FuzzLookEvent(f *testing.F) {
	f.Add(`data: {"choices":[{"delta":{"content":"a\u00e9\ud83d"}}]}`)
	f.Add("event: content_block_delta\ndata: {\"delta\":{\"type\":\"text_delta\",\"text\":\"\\")
	f.Add("event: response.output_text.delta\ndata: {\"delta\":\"\\u12")
	f.Fuzz(func(t *testing.T, ev string) {
		for _, fm := range []Format{FormatChat, FormatMessages, FormatResponses} {
			if n := lookEvent(fm, []byte(ev)).useful; n < 0 || n > len(ev) {
				t.Fatalf("%d useful bytes of %d", n, len(ev))
			}
		}
	})
}

// indexMark finds what bytes.Index finds: in short texts (searched in windows), across the
// windows' edges, and in long ones.
func TestIndexMark(t *testing.T) {
	marks := [][]byte{markContent, markText, markToolCalls, []byte(`"a"`), []byte(`""`), []byte("rror"), []byte("x")}
	texts := []string{
		``, `"`, `content":"`, `"content":"`, `x"content":"y`, `content":" "content":"`,
		`{"a":"content":"","content":"x"}`, `"text":"`, `""text":"`, `"a"a"`, `"""`, `a""`,
		`{"tool_calls":[{"tool_calls":[`, `tool_calls":["tool_calls":[`,
	}
	for _, at := range []int{0, 1, 50, 55, 58, 60, 63, 64, 65, 100, 113, 1000, 1020, 1030, 3000} {
		for _, m := range []string{`"content":"`, "rror"} {
			texts = append(texts, strings.Repeat("y", at)+m+strings.Repeat("z", 7))
			texts = append(texts, strings.Repeat("y", at)+m)
		}
	}
	// Long texts (searched from the mark's first byte, then by bytes.Index once it keeps coming):
	// prose with the mark early, late, twice or missing, and quote-dense JSON around it.
	prose := strings.Repeat("lorem ipsum dolor sit amet ", 400)
	dense := strings.Repeat(`"a":"b",`, 1500)
	for _, long := range []string{
		prose, `{"id":"x","content":"` + prose + `"}`, prose + `"content":"` + prose, prose + `"tool_calls":[`,
		dense, dense + `"content":"`, `"content":"` + dense, dense[:4000] + `"text":"` + prose, prose + dense + `"rror"`,
		strings.Repeat(`"`, 3000) + `"a"`, strings.Repeat(`"a`, 2000) + `""`,
	} {
		texts = append(texts, long)
	}
	for _, b := range texts {
		for _, m := range marks {
			if got, want := indexMark([]byte(b), m), bytes.Index([]byte(b), m); got != want {
				t.Errorf("indexMark(%d bytes %.20q…, %q) = %d, want %d", len(b), b, m, got, want)
			}
		}
	}
}

func FuzzIndexMark(f *testing.F) {
	f.Add([]byte(`{"choices":[{"delta":{"content":"hi"}}]}`), []byte(`"content":"`))
	f.Add([]byte(`""""`), []byte(`""`))
	f.Add([]byte(strings.Repeat("a", 70)+"error"), []byte("error"))
	f.Add([]byte(`{"a":"`+strings.Repeat("lorem ipsum ", 100)+`","usage":{}}`), []byte(`"usage":`))
	f.Add([]byte(strings.Repeat(`"a":"b",`, 200)+`"error"`), []byte(`"error"`))
	f.Fuzz(func(t *testing.T, b, mark []byte) {
		if len(mark) == 0 {
			return
		}
		if got, want := indexMark(b, mark), bytes.Index(b, mark); got != want {
			t.Fatalf("indexMark(%q, %q) = %d, want %d", b, mark, got, want)
		}
	})
}

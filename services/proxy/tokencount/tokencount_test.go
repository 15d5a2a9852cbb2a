package tokencount

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// direct counts s with the encoding's codec in one piece, the reference the walk must match.
func direct(t testing.TB, enc tokenizer.Encoding, parts ...string) int {
	t.Helper()
	c, err := tokenizer.Get(enc)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range parts {
		k, err := c.Count(p)
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return n
}

func TestKnownCounts(t *testing.T) {
	// "Hello, world" is Hello | , | world in both encodings; the framing adds one message and
	// the reply.
	for _, enc := range []tokenizer.Encoding{tokenizer.O200kBase, tokenizer.Cl100kBase} {
		if n := direct(t, enc, "Hello, world"); n != 3 {
			t.Fatalf("%s: Hello, world is %d tokens", enc, n)
		}
	}
	n, enc, err := New().Messages(context.Background(), []byte(`{"model":"x","messages":[{"role":"user","content":"Hello, world"}]}`), "gpt-4o")
	if err != nil || enc != O200kBase || n != 3+MessageOverhead+ReplyOverhead {
		t.Fatalf("count %d %s %v", n, enc, err)
	}
}

// Every part of a request that a model reads is counted, each exactly once, and nothing else.
func TestWalkCountsEveryPart(t *testing.T) {
	const o = tokenizer.O200kBase
	schema := `{"type":"object","properties":{"path":{"type":"string","description":"where"}},"required":["path"]}`
	pretty := "{\n  \"type\": \"object\",\n  \"properties\": {\"path\": {\"type\": \"string\", \"description\": \"where\"}},\n  \"required\": [\"path\"]\n}"
	cases := []struct {
		name  string
		body  string
		parts []string // texts counted
		fixed int      // fixed estimates and framing, beyond the reply
	}{
		{"string content",
			`{"messages":[{"role":"user","content":"The quick brown fox"}]}`,
			[]string{"The quick brown fox"}, MessageOverhead},
		{"text blocks and several messages",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"first part"},{"type":"text","text":" second part","cache_control":{"type":"ephemeral"}}]},
			  {"role":"assistant","content":"an answer"}]}`,
			[]string{"first part", " second part", "an answer"}, 2 * MessageOverhead},
		{"system as a string",
			`{"system":"You are terse.","messages":[{"role":"user","content":"hi"}]}`,
			[]string{"You are terse.", "hi"}, 2 * MessageOverhead},
		{"system as blocks",
			`{"system":[{"type":"text","text":"You are terse."},{"type":"text","text":"Answer in German."}],"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"You are terse.", "Answer in German.", "hi"}, 2 * MessageOverhead},
		{"images and documents get fixed estimates",
			`{"messages":[{"role":"user","content":[
			  {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"}},
			  {"type":"image","source":{"type":"url","url":"https://example.com/a.png"}},
			  {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQK"},"title":"Report"},
			  {"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}},
			  {"type":"text","text":"what is this?"}]}]}`,
			[]string{"Report", "what is this?"}, MessageOverhead + 2*ImageTokens + 2*DocumentTokens},
		{"plain-text and content documents are their text",
			`{"messages":[{"role":"user","content":[
			  {"type":"document","source":{"type":"text","media_type":"text/plain","data":"The grass is green."},"title":"Facts","context":"from a book"},
			  {"type":"document","source":{"type":"content","content":[{"type":"text","text":"Sky is blue."},{"type":"image","source":{"type":"url","url":"u"}}]}}]}]}`,
			[]string{"The grass is green.", "Facts", "from a book", "Sky is blue."}, MessageOverhead + ImageTokens},
		{"tool use and tool results",
			`{"messages":[{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_01","name":"read_file","input":{ "path" : "/etc/hosts" }}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"127.0.0.1 localhost"},
			    {"type":"tool_result","tool_use_id":"toolu_02","is_error":true,"content":[{"type":"text","text":"denied"},{"type":"image","source":{"type":"url","url":"u"}}]}]}]}`,
			[]string{"Let me look.", "read_file", `{"path":"/etc/hosts"}`, "127.0.0.1 localhost", "denied"}, 2*MessageOverhead + ImageTokens},
		{"thinking text, not its signature; redacted thinking not at all",
			`{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"The user wants a list.","signature":"EqQBCkYIBxgCKkBsignaturebytes"},
			  {"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},{"type":"text","text":"Here."}]}]}`,
			[]string{"The user wants a list.", "Here."}, MessageOverhead},
		{"tool definitions: name, description and the schema as compact JSON",
			`{"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"read_file","description":"Reads a file.","input_schema":` + pretty + `},
			  {"name":"now","input_schema":{"type":"object"}}]}`,
			[]string{"hi", "read_file", "Reads a file.", schema, "now", `{"type":"object"}`}, MessageOverhead},
		{"search results",
			`{"messages":[{"role":"user","content":[{"type":"search_result","source":"https://example.com","title":"Example","content":[{"type":"text","text":"Example text."}],"citations":{"enabled":true}}]}]}`,
			[]string{"Example", "https://example.com", "Example text."}, MessageOverhead},
		{"unknown block types: their strings, not their ids or encoded data",
			`{"messages":[{"role":"user","content":[{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[
			  {"type":"web_search_result","title":"Go","url":"https://go.dev","encrypted_content":"EqgfCioIARgBIiQ3YTAw","page_age":"1 day"}]}]}]}`,
			[]string{"Go", "https://go.dev", "1 day"}, MessageOverhead},
		{"empty messages",
			`{"messages":[]}`, nil, 0},
	}
	c := New()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, _, err := c.Messages(context.Background(), []byte(tc.body), "gpt-5")
			if err != nil {
				t.Fatal(err)
			}
			if want := direct(t, o, tc.parts...) + tc.fixed + ReplyOverhead; n != want {
				t.Fatalf("counted %d, want %d", n, want)
			}
		})
	}
}

func TestRequestWithoutMessages(t *testing.T) {
	for _, body := range []string{`{"model":"x"}`, `{"model":"x","messages":"hi"}`, `{"model":"x","messages":{}}`} {
		if _, _, err := New().Messages(context.Background(), []byte(body), "x"); !errors.Is(err, ErrNoMessages) {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestCountGrowsWithContent(t *testing.T) {
	c := New()
	prev := 0
	for _, words := range []int{1, 10, 100, 1000} {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, strings.Repeat("lorem ipsum ", words))
		n, _, err := c.Messages(context.Background(), []byte(body), "gpt-4o")
		if err != nil {
			t.Fatal(err)
		}
		if n <= prev {
			t.Fatalf("%d words: %d tokens, not more than %d", words, n, prev)
		}
		prev = n
	}
}

func TestEncodingFor(t *testing.T) {
	for model, want := range map[string]Encoding{
		"gpt-4o": O200kBase, "gpt-4o-mini": O200kBase, "gpt-4.1": O200kBase, "gpt-4.1-nano": O200kBase, "gpt-4.5-preview": O200kBase,
		"gpt-5": O200kBase, "gpt-5-codex": O200kBase, "o1": O200kBase, "o3-mini": O200kBase, "o4-mini": O200kBase,
		"chatgpt-4o-latest": O200kBase, "openai/gpt-4o": O200kBase, "GPT-4O": O200kBase,
		"gpt-4": Cl100kBase, "gpt-4-turbo": Cl100kBase, "gpt-4-0613": Cl100kBase, "gpt-4-32k": Cl100kBase,
		"gpt-3.5-turbo": Cl100kBase, "gpt-35-turbo": Cl100kBase, "ft:gpt-3.5-turbo:acme::abc": Cl100kBase,
		"openai/gpt-3.5-turbo": Cl100kBase, "text-embedding-3-small": Cl100kBase,
		"llama-3.1-70b": O200kBase, "meta/llama": O200kBase, "qwen3": O200kBase, "": O200kBase,
	} {
		if got := EncodingFor(model); got != want {
			t.Errorf("%q: %s, want %s", model, got, want)
		}
	}
	// The choice is used: a text whose counts differ between the two encodings.
	text := "Grüße aus Köln: 日本語のテキスト, über alles."
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, text)
	for model, enc := range map[string]tokenizer.Encoding{"gpt-4o": tokenizer.O200kBase, "gpt-4": tokenizer.Cl100kBase} {
		n, _, err := New().Messages(context.Background(), []byte(body), model)
		if err != nil || n != direct(t, enc, text)+MessageOverhead+ReplyOverhead {
			t.Fatalf("%s: %d %v", model, n, err)
		}
	}
	if direct(t, tokenizer.O200kBase, text) == direct(t, tokenizer.Cl100kBase, text) {
		t.Fatal("the sample does not tell the encodings apart")
	}
}

// Ordinary long texts are tokenized in pieces with exactly the count of one piece.
func TestPiecesCountLikeTheWhole(t *testing.T) {
	samples := map[string]string{
		"prose":    strings.Repeat("The quick brown fox jumps over the lazy dog. It's 12345 times, isn't it? ", 300),
		"code":     strings.Repeat("func (e *Engine) resolve(ctx context.Context, model string) (target, *errs.Error) {\n\treg := e.opt.Catalog.Registry()\n\treturn reg[\"x\"], nil\n}\n", 150),
		"json":     strings.Repeat(`{"type":"object","properties":{"a":{"type":"string","enum":["x","y"]},"n":12345}},`, 300),
		"markdown": strings.Repeat("## Heading\n\n- item one\n- item two: `code`\n\n> quote, with **bold** text.\n\n", 300),
		"german":   strings.Repeat("Über die Brücke gehen zwölf Möwen; außerdem grüßt der Bäcker. ", 300),
	}
	c := New()
	for name, s := range samples {
		w := &walker{ctx: context.Background(), codec: c.o200k(), budget: len(s)}
		got, err := w.count(s)
		if err != nil {
			t.Fatal(err)
		}
		if want := direct(t, tokenizer.O200kBase, s); got != want {
			t.Errorf("%s: %d in pieces, %d whole", name, got, want)
		}
	}
}

// Pieces never exceed chunkBytes and always advance, whatever the text.
func TestCutBounds(t *testing.T) {
	for _, s := range []string{
		strings.Repeat(" \n", 5000), strings.Repeat("a", 5000), strings.Repeat("日本", 2000), strings.Repeat("x ", 2000),
		strings.Repeat("a", chunkBytes+1), strings.Repeat("a", chunkBytes) + "é", strings.Repeat("ab.", 1000),
	} {
		total := 0
		for rest := s; len(rest) > 0; {
			k := cut(rest)
			if k <= 0 || k > chunkBytes && k != len(rest) {
				t.Fatalf("cut %d of %d bytes", k, len(rest))
			}
			if len(rest) > chunkBytes && k > chunkBytes {
				t.Fatalf("piece of %d bytes", k)
			}
			total += k
			rest = rest[k:]
		}
		if total != len(s) {
			t.Fatal("pieces lost bytes")
		}
	}
}

// Text beyond the budget is estimated at the rate of the text counted, not tokenized.
func TestTextBeyondTheBudgetIsEstimated(t *testing.T) {
	c := New()
	c.exactBytes = 4000
	text := strings.Repeat("lorem ipsum dolor sit amet ", 1000) // 27,000 bytes
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, text)
	n, _, err := c.Messages(context.Background(), []byte(body), "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	exact := direct(t, tokenizer.O200kBase, text[:4000])
	want := exact + extrapolate(len(text)-4000, 4000, exact) + MessageOverhead + ReplyOverhead
	if n != want {
		t.Fatalf("%d, want %d", n, want)
	}
	whole := direct(t, tokenizer.O200kBase, text) + MessageOverhead + ReplyOverhead
	if d := n - whole; d < -whole/50 || d > whole/50 {
		t.Fatalf("estimate %d is more than 2%% off the exact %d", n, whole)
	}
	if extrapolate(8, 0, 0) != 2 || extrapolate(9, 0, 0) != 3 || extrapolate(10, 5, 2) != 4 || extrapolate(11, 5, 2) != 5 {
		t.Fatal("extrapolate rounds up")
	}
}

func TestCanceledCountStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, strings.Repeat("word ", 64*chunkBytes/5+chunkBytes))
	if _, _, err := New().Messages(ctx, []byte(body), "gpt-4o"); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled count: %v", err)
	}
}

// One Counter serves concurrent requests; the vocabulary is loaded once, by whichever comes
// first.
func TestConcurrentCounts(t *testing.T) {
	c := New()
	body := []byte(fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, strings.Repeat("concurrent counting works ", 200)))
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _, _ = c.Messages(context.Background(), body, "gpt-4o")
		}()
	}
	wg.Wait()
	for _, n := range got {
		if n != got[0] || n == 0 {
			t.Fatalf("counts %v", got)
		}
	}
}

// Building a Counter loads no vocabulary: that waits for the first count, off the start-up
// path (a loaded o200k_base vocabulary is some 200,000 map entries).
func TestNewLoadsNothing(t *testing.T) {
	if a := testing.AllocsPerRun(10, func() { New() }); a > 20 {
		t.Fatalf("New allocates %v times: it loads a vocabulary", a)
	}
}

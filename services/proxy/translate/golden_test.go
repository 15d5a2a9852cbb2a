package translate

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// golden compares got with testdata/<dir>/<name>.golden (JSON is compared indented, so a
// reviewer can read the files), or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(path)
	if *update || os.IsNotExist(err) && os.Getenv("CI") != "true" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (run go test -update to accept)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// cases runs fn over every input file of a testdata directory.
func cases(t *testing.T, dir, ext string, fn func(t *testing.T, in []byte) []byte) {
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases in testdata/%s", dir)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ext)
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, strings.TrimSuffix(f, ext)+".golden", fn(t, in))
		})
	}
}

// requestGolden is a translated request with the fields that were dropped.
func requestGolden(t *testing.T, r Request, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	out := indent(t, r.Body)
	if len(r.Dropped) > 0 {
		out = append(out, []byte("dropped: "+strings.Join(r.Dropped, ", ")+"\n")...)
	}
	return out
}

func TestChatRequestToMessages(t *testing.T) {
	cases(t, "chat_request", ".json", func(t *testing.T, in []byte) []byte {
		r, err := ChatToMessages(in, Target{})
		r.Dropped = sorted(r.Dropped)
		return requestGolden(t, r, err)
	})
}

func TestMessagesRequestToChat(t *testing.T) {
	cases(t, "messages_request", ".json", func(t *testing.T, in []byte) []byte {
		target := Target{MaxCompletionTokens: strings.Contains(string(in), `"openai/`)}
		r, err := MessagesToChat(in, target)
		r.Dropped = sorted(r.Dropped)
		return requestGolden(t, r, err)
	})
}

func TestMessagesResponseToChat(t *testing.T) {
	cases(t, "messages_response", ".json", func(t *testing.T, in []byte) []byte {
		out, err := MessagesResponseToChat(in, 1700000000)
		if err != nil {
			t.Fatal(err)
		}
		return indent(t, out)
	})
}

func TestChatResponseToMessages(t *testing.T) {
	cases(t, "chat_response", ".json", func(t *testing.T, in []byte) []byte {
		out, err := ChatResponseToMessages(in)
		if err != nil {
			t.Fatal(err)
		}
		return indent(t, out)
	})
}

// splitEvents cuts an SSE document into its events.
func splitEvents(doc []byte) [][]byte {
	var out [][]byte
	for _, ev := range bytes.Split(doc, []byte("\n\n")) {
		if len(bytes.TrimSpace(ev)) > 0 {
			out = append(out, append(ev, '\n', '\n'))
		}
	}
	return out
}

func TestMessagesStreamToChat(t *testing.T) {
	cases(t, "messages_stream", ".sse", func(t *testing.T, in []byte) []byte {
		s := &MessagesToChatStream{IncludeUsage: true, Created: 1700000000}
		var out []byte
		for _, ev := range splitEvents(in) {
			out = s.Event(out, ev)
		}
		return out
	})
}

func TestChatStreamToMessages(t *testing.T) {
	cases(t, "chat_stream", ".sse", func(t *testing.T, in []byte) []byte {
		s := NewChatToMessagesStream()
		var out []byte
		for _, ev := range splitEvents(in) {
			out = s.Event(out, ev)
		}
		return out
	})
}

func sorted(list []string) []string {
	for i := range list {
		for j := i + 1; j < len(list); j++ {
			if list[j] < list[i] {
				list[i], list[j] = list[j], list[i]
			}
		}
	}
	return list
}

func TestResponsesRequestToChat(t *testing.T) {
	cases(t, "responses_request", ".json", func(t *testing.T, in []byte) []byte {
		r, err := ResponsesToChat(in, Target{})
		r.Dropped = sorted(r.Dropped)
		return requestGolden(t, r, err)
	})
}

func TestChatResponseToResponses(t *testing.T) {
	cases(t, "responses_answer", ".json", func(t *testing.T, in []byte) []byte {
		out, err := ChatResponseToResponses(in, EchoOf([]byte(`{"instructions":"Be brief.","store":false}`)))
		if err != nil {
			t.Fatal(err)
		}
		return indent(t, out)
	})
}

func TestChatStreamToResponses(t *testing.T) {
	cases(t, "responses_stream", ".sse", func(t *testing.T, in []byte) []byte {
		s := &ChatToResponsesStream{Echo: EchoOf(nil), Created: 1700000000}
		var out []byte
		for _, ev := range splitEvents(in) {
			out = s.Event(out, ev)
		}
		return s.Abort(out, "stream_incomplete", "the upstream stream ended before it was complete")
	})
}

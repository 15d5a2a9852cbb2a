// Package convotest holds what the tests of the conversation model's format packages share:
// golden files, fixtures, fuzz seeds, SSE documents cut into events. Only tests import it.
package convotest

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
)

// Update is the -update flag of every test binary that imports this package: it rewrites the
// golden files from the current output (read the diff before committing it).
var Update = flag.Bool("update", false, "rewrite the golden files from the current output")

// Golden compares got with the golden file at path, or rewrites it with -update (and writes a
// missing one outside CI).
func Golden(t *testing.T, path string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(path)
	if *Update || os.IsNotExist(err) && os.Getenv("CI") != "true" {
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

// Goldens runs fn on every file of testdata/dir ending in ext, each in a subtest named for the
// file, and compares what fn returns with the golden file beside it: the same name, ending in
// golden instead of ext.
func Goldens(t *testing.T, dir, ext, golden string, fn func(t *testing.T, in []byte) []byte) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(names) == 0 {
		t.Fatalf("no cases in testdata/%s", dir)
	}
	for _, name := range names {
		base := strings.TrimSuffix(name, ext)
		t.Run(filepath.Base(base), func(t *testing.T) {
			Golden(t, base+golden, fn(t, Read(t, name)))
		})
	}
}

// Indent is JSON indented the way the golden files are, with a final newline.
func Indent(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// Read is a fixture's content.
func Read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Seed adds every file of testdata/dir ending in ext to the fuzz corpus.
func Seed(f *testing.F, dir, ext string) {
	names, _ := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	for _, name := range names {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
}

// SplitEvents cuts an SSE document into its events, each with its blank line.
func SplitEvents(doc []byte) [][]byte {
	var out [][]byte
	for _, ev := range bytes.Split(doc, []byte("\n\n")) {
		if len(bytes.TrimSpace(ev)) > 0 {
			out = append(out, append(ev[:len(ev):len(ev)], '\n', '\n'))
		}
	}
	return out
}

// ReadStream runs an SSE document, event by event, through a fresh stream reader.
func ReadStream(r convo.StreamReader, doc []byte) []convo.Event {
	var evs []convo.Event
	for _, ev := range SplitEvents(doc) {
		evs = r.Read(evs, ev)
	}
	return evs
}

// Write appends what w writes for each of evs to out.
func Write(w convo.StreamWriter, out []byte, evs []convo.Event) []byte {
	for i := range evs {
		out = w.Write(out, &evs[i])
	}
	return out
}

// Relay runs an SSE document, event by event, through a stream reader and the events of each
// through w, appending what w writes to out: a stream as the engine relays it.
func Relay(r convo.StreamReader, w convo.StreamWriter, out, doc []byte) []byte {
	var evs []convo.Event
	for _, ev := range SplitEvents(doc) {
		evs = r.Read(evs[:0], ev)
		out = Write(w, out, evs)
	}
	return out
}

// NamedEvents parses the output of a writer of named SSE events (Anthropic's, Responses'): each
// event's name and data, failing unless every event ends with its blank line, has a name and
// carries JSON.
func NamedEvents(t testing.TB, out []byte) (names []string, datas [][]byte) {
	t.Helper()
	if len(out) == 0 {
		return nil, nil
	}
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Fatalf("output does not end an event: %q", out)
	}
	for _, ev := range bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n")) {
		name, data := convo.ParseEvent(ev)
		if name == "" || !json.Valid(data) {
			t.Fatalf("not a named event with JSON data: %q", ev)
		}
		names = append(names, name)
		datas = append(datas, data)
	}
	return names, datas
}

// BenchRead measures a request reader on one body.
func BenchRead(b *testing.B, read func([]byte) (*convo.Request, error), body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := read(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchReadAnswer measures an answer reader on one body, reusing its event slice.
func BenchReadAnswer(b *testing.B, read func([]convo.Event, []byte) ([]convo.Event, error), body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var evs []convo.Event
	for b.Loop() {
		var err error
		if evs, err = read(evs[:0], body); err != nil {
			b.Fatal(err)
		}
	}
}

// AnswerWriter is a format's AppendAnswer: the answer for request r, written from evs.
type AnswerWriter func(dst []byte, r *convo.Request, evs []convo.Event, created int64) ([]byte, error)

// BenchAppendAnswer measures an answer writer on events, reusing its buffer.
func BenchAppendAnswer(b *testing.B, write AnswerWriter, r *convo.Request, evs []convo.Event) {
	out, err := write(nil, r, evs, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		out, _ = write(out[:0], r, evs, 1)
	}
}

// BenchAnswerThrough measures an answer read into events and written again for request r,
// reusing the event slice and the buffer: one side of a translated answer.
func BenchAnswerThrough(b *testing.B, read func([]convo.Event, []byte) ([]convo.Event, error), write AnswerWriter, r *convo.Request, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var evs []convo.Event
	var out []byte
	for b.Loop() {
		var err error
		if evs, err = read(evs[:0], body); err != nil {
			b.Fatal(err)
		}
		if out, err = write(out[:0], r, evs, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// Reread fails unless a request a writer wrote from body (out, or the writer's err) is valid
// JSON that read takes again: what a fuzz target asks of every request it gets through.
func Reread(t *testing.T, read func([]byte) (*convo.Request, error), body, out []byte, err error) {
	t.Helper()
	if err != nil || !json.Valid(out) {
		t.Fatalf("invalid request for %q: %v\n%s", body, err, out)
	}
	if _, err := read(out); err != nil {
		t.Fatalf("the written request does not read again: %v\n%s", err, out)
	}
}

// FuzzRequests fuzzes a format's request reader, seeded with testdata/request and the seeds: a
// body is refused, or it reads into a request that write writes as valid JSON the reader takes
// again (write may ask more of the request it gets). Nothing panics.
func FuzzRequests(f *testing.F, read func([]byte) (*convo.Request, error), write func(t *testing.T, body []byte, r *convo.Request) ([]byte, error), seeds ...string) {
	Seed(f, "request", ".json")
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := read(body)
		if err != nil {
			return
		}
		out, err := write(t, body, r)
		Reread(t, read, body, out, err)
	})
}

// Through reads a request and writes it again with a writer (of the same format, for a round
// trip), failing the test on an error of either.
func Through(t testing.TB, read func([]byte) (*convo.Request, error), write func([]byte, *convo.Request, convo.Target) ([]byte, error), in []byte) (*convo.Request, []byte) {
	t.Helper()
	r, err := read(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := write(nil, r, convo.Target{})
	if err != nil {
		t.Fatal(err)
	}
	return r, out
}

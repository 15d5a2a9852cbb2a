package convo_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/chat"
	"switchyard/services/proxy/convo/convotest"
	"switchyard/services/proxy/convo/messages"
	"switchyard/services/proxy/convo/responses"
)

// The golden matrix: every client format × upstream format pair through the model, for
// requests (client → upstream), whole answers and streams (upstream → client), on the fixtures
// of each format's own package (real Claude Code and Codex CLI requests among them). Same-format
// pairs never come here: the engine passes them through byte-exact (e2e proves it).
//
// go test ./services/proxy/convo -run TestMatrix -update rewrites the goldens; read the diff.

type format struct {
	name          string
	dir           string // the format package's testdata
	readRequest   func([]byte) (*convo.Request, error)
	appendRequest func([]byte, *convo.Request, convo.Target) ([]byte, error)
	readAnswer    func([]convo.Event, []byte) ([]convo.Event, error)
	appendAnswer  func([]byte, *convo.Request, []convo.Event, int64) ([]byte, error)
	streamReader  func() convo.StreamReader
	streamWriter  func(*convo.Request, int64) convo.StreamWriter
	// requests, answers and streams are the fixture globs, relative to dir.
	requests, answers, streams string
	// client is the request a client of this format sent, for the answer writers.
	client string
}

var formats = []format{
	{name: "chat", dir: "chat/testdata", readRequest: chat.ReadRequest, appendRequest: chat.AppendRequest,
		readAnswer: chat.ReadAnswer, appendAnswer: chat.AppendAnswer,
		streamReader: func() convo.StreamReader { return chat.NewStreamReader() },
		streamWriter: func(r *convo.Request, c int64) convo.StreamWriter { return chat.NewStreamWriter(r, c) },
		requests:     "request/*.json", answers: "answer/*.json", streams: "stream/*.sse",
		client: `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`},
	{name: "messages", dir: "messages/testdata", readRequest: messages.ReadRequest, appendRequest: messages.AppendRequest,
		readAnswer: messages.ReadAnswer, appendAnswer: messages.AppendAnswer,
		streamReader: func() convo.StreamReader { return messages.NewStreamReader() },
		streamWriter: func(r *convo.Request, c int64) convo.StreamWriter { return messages.NewStreamWriter(r, c) },
		requests:     "request/*.json", answers: "answer/*.json", streams: "stream/*.sse",
		client: `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`},
	{name: "responses", dir: "responses/testdata", readRequest: responses.ReadRequest, appendRequest: responses.AppendRequest,
		readAnswer: responses.ReadAnswer, appendAnswer: responses.AppendAnswer,
		streamReader: func() convo.StreamReader { return responses.NewStreamReader() },
		streamWriter: func(r *convo.Request, c int64) convo.StreamWriter { return responses.NewStreamWriter(r, c) },
		requests:     "request/*.json", answers: "upstream/*.json", streams: "upstream/*.sse",
		client: `{"model":"m","input":"hi","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`},
}

func fixtures(t *testing.T, f format, glob string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(f.dir, glob))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures %s/%s", f.dir, glob)
	}
	return files
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *convotest.Update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n got %s\nwant %s", path, got, want)
	}
}

func base(path string) string { return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)) }

// events splits an SSE fixture into its events.
func events(b []byte) [][]byte {
	var out [][]byte
	for _, ev := range bytes.Split(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		if len(bytes.TrimSpace(ev)) > 0 {
			out = append(out, append(ev, '\n', '\n'))
		}
	}
	return out
}

// checkSSE: every event the writer wrote is whole and its data is JSON (or [DONE]).
func checkSSE(t *testing.T, out []byte) {
	t.Helper()
	for _, ev := range events(out) {
		_, data := convo.ParseEvent(ev)
		if string(data) != "[DONE]" && !json.Valid(data) {
			t.Fatalf("an event's data is not JSON: %q", ev)
		}
	}
}

func TestMatrixRequests(t *testing.T) {
	for _, src := range formats {
		for _, dst := range formats {
			if src.name == dst.name {
				continue
			}
			for _, file := range fixtures(t, src, src.requests) {
				t.Run(src.name+"-to-"+dst.name+"/"+base(file), func(t *testing.T) {
					body, _ := os.ReadFile(file)
					r, err := src.readRequest(body)
					if err != nil {
						t.Fatalf("read: %v", err)
					}
					out, err := dst.appendRequest(nil, r, convo.Target{})
					if err != nil {
						t.Fatalf("write: %v", err)
					}
					if _, err := dst.readRequest(out); err != nil {
						t.Fatalf("the upstream's format does not read what its writer wrote: %v\n%s", err, out)
					}
					got := convotest.Indent(t, out)
					if len(r.Dropped) > 0 {
						got = append(got, "dropped: "+strings.Join(r.Dropped, ", ")+"\n"...)
					}
					golden(t, filepath.Join("testdata", "matrix", "request", src.name+"-to-"+dst.name, base(file)+".golden"), got)
				})
			}
		}
	}
}

// clientPairs calls f for every pair of a client format and another upstream format, with the
// request the client sent.
func clientPairs(t *testing.T, f func(client, up format, req *convo.Request)) {
	for _, client := range formats {
		for _, up := range formats {
			if client.name == up.name {
				continue
			}
			req, err := client.readRequest([]byte(client.client))
			if err != nil {
				t.Fatal(err)
			}
			f(client, up, req)
		}
	}
}

func TestMatrixAnswers(t *testing.T) {
	clientPairs(t, func(client, up format, req *convo.Request) {
		for _, file := range fixtures(t, up, up.answers) {
			t.Run(up.name+"-to-"+client.name+"/"+base(file), func(t *testing.T) {
				body, _ := os.ReadFile(file)
				evs, err := up.readAnswer(nil, body)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				out, err := client.appendAnswer(nil, req, evs, 1700000000)
				if err != nil {
					t.Fatalf("write: %v", err)
				}
				golden(t, filepath.Join("testdata", "matrix", "answer", up.name+"-to-"+client.name, base(file)+".golden"), convotest.Indent(t, out))
			})
		}
	})
}

func TestMatrixStreams(t *testing.T) {
	clientPairs(t, func(client, up format, req *convo.Request) {
		req.Stream = true
		for _, file := range fixtures(t, up, up.streams) {
			t.Run(up.name+"-to-"+client.name+"/"+base(file), func(t *testing.T) {
				body, _ := os.ReadFile(file)
				r, w := up.streamReader(), client.streamWriter(req, 1700000000)
				var out, buf []byte
				var evs []convo.Event
				ended := false
				for _, ev := range events(body) {
					// One buffer for every upstream event, as the relay reads them: what a
					// writer keeps of an earlier event must not change under it.
					buf = append(buf[:0], ev...)
					evs = r.Read(evs[:0], buf)
					for i := range evs {
						e := &evs[i]
						if e.Kind == convo.EvStart || e.Kind == convo.EvBlockStart {
							e.ID, e.Model = strings.Clone(e.ID), strings.Clone(e.Model)
							e.Name, e.Namespace = strings.Clone(e.Name), strings.Clone(e.Namespace)
						}
						ended = ended || e.Kind == convo.EvEnd || e.Kind == convo.EvError
						out = w.Write(out, e)
					}
					clear(buf) // an event's bytes are gone once the next is read
				}
				if !ended {
					out = w.Abort(out, "stream_incomplete", "the upstream stream ended before it was complete")
				}
				checkSSE(t, out)
				golden(t, filepath.Join("testdata", "matrix", "stream", up.name+"-to-"+client.name, base(file)+".golden"), out)
			})
		}
	})
}

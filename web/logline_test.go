package web

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/services/proxy"
)

// slogLine is the line slog's own handler writes for l at t: the reference.
func slogLine(t *testing.T, json bool, l *requestLine, at time.Time) string {
	t.Helper()
	var buf bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&buf, nil)
	if json {
		h = slog.NewJSONHandler(&buf, nil)
	}
	r := slog.NewRecord(at, l.Level, "request", 0)
	r.AddAttrs(l.attrs()...)
	if err := h.Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// awkward are values a request line may carry that slog quotes or escapes.
var awkward = []string{"", " ", "plain", "with space", "a=b", `quo"te`, `back\slash`, "tab\there", "new\nline",
	"cr\rx", "\x00nul", "\x1f", "\x7f", "del\x7fx", "ünïcödé", "日本語", "\u00a0nbsp", "\u2028ls", "\u2029ps",
	"\ufffd", "bad\xffutf8", "\xc3", "emoji 😀", "\u200bzero-width", "<html>&amp;", "[redacted]", "-", "=",
	"trailing ", "end=", "\u0085nel", "\u3000ideographic", strings.Repeat("long ", 200)}

// awkwardLines are request lines covering every optional part and the values above.
func awkwardLines() []requestLine {
	base := requestLine{Level: slog.LevelInfo, RequestID: "7f3a9c0d2e1b4a5f6c7d8e9f", Method: "POST",
		Path: "/v1/chat/completions", Status: 200, Bytes: 512, Duration: 1234567 * time.Nanosecond}
	var out []requestLine
	out = append(out, base)
	up := base
	up.Upstream, up.Provider, up.Model, up.ConnectionID, up.Attempts = true, "bench", "json-small-0ms", 7, 1
	out = append(out, up)
	st := up
	st.Stream, st.Complete, st.TTFT = true, true, 987654*time.Nanosecond
	st.Tokens, st.InputTokens, st.OutputTokens = true, 12, 3456
	out = append(out, st)
	fail := st
	fail.Level, fail.Status, fail.ErrorCode, fail.HasError, fail.Error = slog.LevelError, 500, "internal", true, "internal: boom"
	fail.Complete = false
	out = append(out, fail)
	for i, s := range awkward {
		l := st
		l.RequestID, l.Path, l.Provider, l.Model, l.ErrorCode, l.HasError, l.Error = s, "/v1/"+s, s, s, s, true, s
		l.Method = []string{"GET", "POST", s}[i%3]
		l.Duration = []time.Duration{0, 1, 999, time.Microsecond, 1500 * time.Microsecond, time.Second, 90 * time.Minute,
			-5 * time.Millisecond, math.MaxInt64, math.MinInt64}[i%10]
		l.TTFT = -l.Duration
		l.Status, l.Bytes, l.ConnectionID, l.Attempts = 100+i*17, int64(i)<<40, -int64(i), i
		l.InputTokens, l.OutputTokens = math.MaxInt64-int64(i), -int64(i)
		l.Stream, l.Complete = i%2 == 0, i%3 == 0
		l.Tokens = i%4 != 0
		l.Upstream = i%5 != 0
		l.HasError = i%6 != 0
		l.Level = []slog.Level{slog.LevelInfo, slog.LevelError}[i%2]
		out = append(out, l)
	}
	return out
}

// lineTimes are instants around the millisecond rounding slog does, in several zones.
func lineTimes() []time.Time {
	kolkata := time.FixedZone("IST", 5*3600+30*60)
	return []time.Time{
		time.Date(2026, 12, 2, 6, 27, 1, 807262123, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, kolkata),
		time.Date(2026, 6, 15, 12, 0, 0, 100000, time.FixedZone("", -7*3600)),
		time.Date(2026, 3, 29, 1, 30, 0, 999500000, time.Local),
		time.Now(), // with a monotonic reading, which the line drops
	}
}

// TestRequestLineMatchesSlog: the hand-written request line is byte for byte what slog's text
// and JSON handlers write for the same attributes, awkward values included.
func TestRequestLineMatchesSlog(t *testing.T) {
	for _, json := range []bool{false, true} {
		for _, at := range lineTimes() {
			for i, l := range awkwardLines() {
				want := slogLine(t, json, &l, at)
				var got []byte
				if json {
					got = l.appendJSON(nil, at)
				} else {
					got = l.appendText(nil, at)
				}
				if string(got) != want {
					t.Fatalf("json=%v line %d at %v:\n got %q\nwant %q", json, i, at, got, want)
				}
			}
		}
	}
}

// FuzzRequestLine compares the hand-written line with slog's for any strings and numbers.
func FuzzRequestLine(f *testing.F) {
	for _, s := range awkward {
		f.Add(s, s, int64(len(s)), int64(-len(s)), true)
	}
	f.Fuzz(func(t *testing.T, a, b string, n, d int64, flag bool) {
		l := requestLine{Level: slog.LevelInfo, RequestID: a, Method: b, Path: a + b, Status: int(n), Bytes: d,
			Duration: time.Duration(d), ErrorCode: b, Upstream: flag, Provider: a, Model: b, ConnectionID: n,
			Attempts: int(d), Stream: !flag, Complete: flag, TTFT: time.Duration(n), Tokens: flag, InputTokens: n,
			OutputTokens: d, HasError: !flag, Error: a}
		at := time.Unix(0, n%(1<<62)).UTC()
		if at.Year() < 0 || at.Year() > 9999 {
			at = time.Unix(0, 0)
		}
		for _, json := range []bool{false, true} {
			var got []byte
			if json {
				got = l.appendJSON(nil, at)
			} else {
				got = l.appendText(nil, at)
			}
			if want := slogLine(t, json, &l, at); string(got) != want {
				t.Fatalf("json=%v:\n got %q\nwant %q", json, got, want)
			}
		}
	})
}

// TestLogHandlerWritesTheRequestLine: through a logger on a LogHandler the request line comes
// out as slog would write it, only at the handler's level and above, and every other line (a
// derived logger's included) still goes through slog.
func TestLogHandlerWritesTheRequestLine(t *testing.T) {
	at := time.Date(2026, 12, 2, 6, 27, 1, 807262123, time.UTC)
	lines := awkwardLines()
	for _, json := range []bool{false, true} {
		var buf bytes.Buffer
		log := slog.New(NewLogHandler(&buf, json, slog.LevelInfo))
		logLine(log, context.Background(), &lines[2], at)
		if want := slogLine(t, json, &lines[2], at); buf.String() != want {
			t.Fatalf("json=%v: got %q, want %q", json, buf.String(), want)
		}
		buf.Reset()
		log.With("component", "x").Info("other", "n", 1)
		if !strings.Contains(buf.String(), "component") || !strings.Contains(buf.String(), "other") {
			t.Fatalf("json=%v: a derived logger's line: %q", json, buf.String())
		}

		buf.Reset()
		quiet := slog.New(NewLogHandler(&buf, json, slog.LevelWarn))
		logLine(quiet, context.Background(), &lines[2], at) // info: below the level
		if buf.Len() != 0 {
			t.Fatalf("json=%v: an info request line at level warn: %q", json, buf.String())
		}
		logLine(quiet, context.Background(), &lines[3], at) // error
		if want := slogLine(t, json, &lines[3], at); buf.String() != want {
			t.Fatalf("json=%v: error line at level warn: got %q, want %q", json, buf.String(), want)
		}
	}

	// A logger with another handler gets the same attributes through slog.
	var buf bytes.Buffer
	logLine(slog.New(slog.NewTextHandler(&buf, nil)), context.Background(), &lines[2], at)
	got, want := buf.String(), slogLine(t, false, &lines[2], at)
	if _, rest, _ := strings.Cut(got, " "); !strings.HasSuffix(want, " "+rest) { // slog took the time itself
		t.Fatalf("through slog: got %q, want %q after the time", got, want)
	}
}

// BenchmarkRequestLine compares the request line written by hand with the same line through
// slog's text handler (both to io.Discard).
func BenchmarkRequestLine(b *testing.B) {
	l := awkwardLines()[2]
	ctx := context.Background()
	b.Run("slog", func(b *testing.B) {
		log := slog.New(slog.NewTextHandler(discard{}, nil))
		b.ReportAllocs()
		for b.Loop() {
			log.LogAttrs(ctx, l.Level, "request", l.attrs()...)
		}
	})
	b.Run("hand", func(b *testing.B) {
		log := slog.New(NewLogHandler(discard{}, false, slog.LevelInfo))
		b.ReportAllocs()
		for b.Loop() {
			logLine(log, ctx, &l, time.Now())
		}
	})
}

// countingWriter records each Write it is given.
type countingWriter struct {
	mu     sync.Mutex
	writes []string
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func (w *countingWriter) got() (all string, writes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.writes, ""), len(w.writes)
}

func TestBufferedLogHandlerHoldsLinesBackUntilDue(t *testing.T) {
	var w countingWriter
	h := NewBufferedLogHandler(&w, false, slog.LevelInfo, time.Hour)
	log := slog.New(h)
	for i := range 50 {
		log.Info("one", "i", i)
		logLine(log, context.Background(), &requestLine{Level: slog.LevelInfo, RequestID: "r", Method: "GET", Path: "/v1/models", Status: 200}, time.Now())
	}
	if all, n := w.got(); n != 0 {
		t.Fatalf("info lines written before they were due: %d writes: %q", n, all)
	}
	// A warning goes out at once, with every line before it, in one write.
	log.Warn("careful")
	all, n := w.got()
	if n != 1 || strings.Count(all, "\n") != 101 || !strings.HasSuffix(all, "msg=careful\n") || !strings.Contains(all, "msg=one i=0\n") {
		t.Fatalf("after the warning: %d writes, %d lines, ends %q", n, strings.Count(all, "\n"), all[max(0, len(all)-40):])
	}
	// So does one from a derived logger, and a request line at warn.
	log.With("provider", "p").Info("held")
	log.With("provider", "p").Error("failed")
	if all, n := w.got(); n != 2 || !strings.HasSuffix(all, "msg=failed provider=p\n") || !strings.Contains(all, "msg=held provider=p\n") {
		t.Fatalf("a derived logger's error did not write at once: %d writes: %q", n, all)
	}
	logLine(log, context.Background(), &requestLine{Level: slog.LevelWarn, RequestID: "r2", Method: "POST", Path: "/v1/messages", Status: 502}, time.Now())
	if all, n := w.got(); n != 3 || !strings.Contains(all, "request_id=r2") {
		t.Fatalf("a request line at warn did not write at once: %d writes", n)
	}
	// Flush writes what waits; Close makes later lines go out one by one.
	log.Info("before close")
	h.Flush()
	if all, n := w.got(); n != 4 || !strings.HasSuffix(all, "msg=\"before close\"\n") {
		t.Fatalf("Flush: %d writes", n)
	}
	h.Close()
	log.Info("after close")
	if all, n := w.got(); n != 5 || !strings.HasSuffix(all, "msg=\"after close\"\n") {
		t.Fatalf("after Close a line waited: %d writes", n)
	}
}

func TestBufferedLogHandlerWritesWhenFullAndWhenDue(t *testing.T) {
	var w countingWriter
	log := slog.New(NewBufferedLogHandler(&w, true, slog.LevelInfo, time.Hour))
	long := strings.Repeat("x", 1000)
	lines := 0
	for {
		log.Info("fill", "v", long)
		lines++
		if _, n := w.got(); n > 0 {
			break
		}
		if lines > 2*LogBuffer/1000 {
			t.Fatal("a full buffer was never written")
		}
	}
	all, _ := w.got()
	if len(all) > LogBuffer || strings.Count(all, "\n") != lines-1 {
		t.Fatalf("the write when full: %d bytes, %d lines of %d", len(all), strings.Count(all, "\n"), lines)
	}
	// A line larger than the buffer is written by itself, after what waited.
	huge := strings.Repeat("y", LogBuffer)
	log.Info("huge", "v", huge)
	all, n := w.got()
	if n != 3 || !strings.Contains(all, huge) || strings.Count(all, "\n") != lines+1 {
		t.Fatalf("a huge line: %d writes, %d lines", n, strings.Count(all, "\n"))
	}

	// With a short interval the timer writes the lines without anything else happening.
	var w2 countingWriter
	log2 := slog.New(NewBufferedLogHandler(&w2, false, slog.LevelInfo, time.Millisecond))
	log2.Info("first")
	log2.Info("second")
	for deadline := time.Now().Add(10 * time.Second); ; {
		all, n := w2.got()
		if strings.Contains(all, "msg=second") {
			if n != 1 {
				t.Fatalf("the due lines took %d writes", n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lines held back past their interval")
		}
		time.Sleep(time.Millisecond)
	}
	log2.Info("third")
	for deadline := time.Now().Add(10 * time.Second); ; {
		if all, _ := w2.got(); strings.Contains(all, "msg=third") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the timer was not armed again")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNewRequestIDIsUniqueAndValid(t *testing.T) {
	seen := map[string]bool{}
	for range 100_000 {
		id := newRequestID()
		if len(id) != 16 || !proxy.ValidIdempotencyKey(id) || strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Fatalf("request id %q: not 16 base64url characters", id)
		}
		if seen[id] {
			t.Fatalf("request id %q given twice", id)
		}
		seen[id] = true
	}
}

package traffic

import (
	"context"
	"strings"
	"switchyard/db/dbtest"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"

	"switchyard/services/redact"
	"switchyard/services/servicetest"
)

func TestClipTruncatesOnUTF8Boundaries(t *testing.T) {
	clean := func(s string) string { return s }
	cases := []struct {
		name      string
		raw       string
		size      int64 // 0: the capture is the whole body
		limit     int
		want      string
		truncated bool
	}{
		{"short body kept whole", `{"a":"b"}`, 0, 16, `{"a":"b"}`, false},
		{"exactly the limit", `{"a":"bcdefgh"}`, 0, 15, `{"a":"bcdefgh"}`, false},
		{"ascii cut at the limit", `{"a":"bcdefgh"}`, 0, 8, `{"a":"bc`, true},
		{"a two-byte rune is not split", `{"a":"ää"}`, 0, 8, `{"a":"ä`, true},  // ä is 2 bytes: 6+2 fits
		{"a two-byte rune over the edge", `{"a":"ää"}`, 0, 9, `{"a":"ä`, true}, // 6+2+1 would split the second
		{"a four-byte rune over the edge", `{"a":"😀x"}`, 0, 8, `{"a":"`, true}, // 😀 is 4 bytes
		{"a capture cut mid-token loses the token", `{"a":"one two thr`, 100, 64, `{"a":"one two `, true},
		{"a capture cut at a delimiter keeps all", `{"a":"one",`, 100, 64, `{"a":"one",`, true},
		{"invalid bytes become replacement runes", "{\"a\":\"\xff\"}", 0, 64, "{\"a\":\"\uFFFD\"}", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			size := tc.size
			if size == 0 {
				size = int64(len(tc.raw))
			}
			got := clip([]byte(tc.raw), size, tc.limit, clean)
			if !got.Stored || got.Text != tc.want || got.Truncated != tc.truncated {
				t.Fatalf("clip = %+v, want %q truncated %v", got, tc.want, tc.truncated)
			}
			if !utf8.ValidString(got.Text) || len(got.Text) > tc.limit {
				t.Fatalf("%q: invalid UTF-8 or over the limit", got.Text)
			}
		})
	}
}

func TestClipRedactsBeforeItTruncates(t *testing.T) {
	clean := func(s string) string { return redact.Fields(redact.String(s, "conn.secret.value")) }
	clientKey := "sk-sy-" + strings.Repeat("Ab1_-", 8)
	body := `{"model":"m","api_key":"plain-value-1","messages":[{"role":"user","content":"use ` + clientKey +
		` and conn.secret.value"}],"metadata":{"password":"hunter2","Authorization":"Basic Zm9vOmJhcg=="},"x":"` +
		strings.Repeat("y", 100) + `"}`
	got := clip([]byte(body), int64(len(body)), 1<<10, clean)
	for _, secret := range []string{clientKey, "conn.secret.value", "plain-value-1", "hunter2", "Zm9vOmJhcg=="} {
		if strings.Contains(got.Text, secret) {
			t.Errorf("%q kept: %s", secret, got.Text)
		}
	}
	if got.Truncated || !strings.Contains(got.Text, `"api_key":"[redacted]"`) || !strings.Contains(got.Text, `"model":"m"`) {
		t.Fatalf("clip = %+v", got)
	}

	// A key that straddles the limit is redacted whole before the cut, never kept in part.
	key := "sk-proj-" + strings.Repeat("K", 40)
	body = `{"content":"` + strings.Repeat("a", 90) + " " + key + ` tail"}`
	got = clip([]byte(body), int64(len(body)), 110, clean)
	if !got.Truncated || strings.Contains(got.Text, "KKKK") || !strings.HasPrefix(got.Text, `{"content":"aaa`) {
		t.Fatalf("straddling key: %+v", got)
	}
}

// Captured bodies waiting for the runner are bounded: past the bound an entry is kept without
// its bodies, and what was written no longer counts.
func TestPendingBodiesAreBounded(t *testing.T) {
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClockAt(time.Unix(1_800_000_000, 0))
	s := newService(t, d, clk, Options{Retention: 24 * time.Hour, BodyBytes: 1 << 10})
	big := make([]byte, 0, maxPendingBodies/3+1) // one buffer, counted by each capture that holds it
	for i := 0; i < 3; i++ {
		s.Record(Entry{At: clk.Now(), Surface: "/v1/chat/completions", Status: 200,
			Capture: &Capture{Request: append(big, `{"a":1}`...), RequestSize: 7, Response: []byte("{}"), ResponseSize: 2}})
	}
	if held := s.bodies.Load(); held > maxPendingBodies {
		t.Fatalf("%d bytes held, bound %d", held, maxPendingBodies)
	}
	_, stop := servicetest.Start(t, s.Run)
	defer stop()
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if held := s.bodies.Load(); held != 0 {
		t.Fatalf("%d bytes still counted after the write", held)
	}
	list, err := s.List(context.Background(), Filter{})
	if err != nil || len(list) != 3 {
		t.Fatalf("%d rows, %v", len(list), err)
	}
	kept := 0
	for _, e := range list {
		full, err := s.Get(context.Background(), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if full.RequestBody.Stored {
			kept++
			if full.RequestBody.Text != `{"a":1}` || full.ResponseBody.Text != "{}" {
				t.Fatalf("bodies %+v %+v", full.RequestBody, full.ResponseBody)
			}
		}
	}
	if kept != 2 {
		t.Fatalf("%d entries kept their bodies, want the 2 within the bound", kept)
	}
}

package settings

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"switchyard/services/errs"
)

func FuzzPatch(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`null`,
		`{"retry":{"max_retries":5,"jitter":0.25,"retry_on_statuses":["5xx"]}}`,
		`{"model_lockout":{"base_cooldown_ms":700000,"max_cooldown_ms":6000}}`,
		`{"retry":null,"streams":{"throughput_watchdog":{"enabled":true}}}`,
		`{"error_rules":[{"name":"a","statuses":[429],"header_matches":{"x-a":"0"},"reason":"rate_limit","scope":"connection"}]}`,
		`{"status_restatements":[{"name":"s","from_status":403,"body_markers":["quota"],"to_status":429}]}`,
		`{"bogus":{"retry":1}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		store := NewMemoryStore()
		s, err := New(ctx, store, nil, fixedNow)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Patch(ctx, data); err != nil {
			var e *errs.Error
			if !errors.As(err, &e) || e.Code != errs.Invalid || len(e.Fields) == 0 {
				t.Fatalf("Patch error is not an Invalid *errs.Error with fields: %v", err)
			}
			return
		}
		reloaded, err := New(ctx, store, nil, fixedNow)
		if err != nil {
			t.Fatal(err)
		}
		if w := reloaded.Warnings(); len(w) != 0 {
			t.Fatalf("reload warnings: %v", w)
		}
		want, got := s.Effective(), reloaded.Effective()
		want.Revision, got.Revision = 0, 0
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(got)
		if string(wb) != string(gb) {
			t.Fatalf("reload differs:\nsaved    %s\nreloaded %s", wb, gb)
		}
	})
}

package app

import (
	"context"
	"strings"
	"testing"

	"switchyard/db"
	"switchyard/db/dbtest"
	"switchyard/services/secrets"
)

// Shared values are sealed at rest, open only under their own name, and read back as put.
func TestSealedValues(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	box, err := secrets.NewBox([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	kv := db.KV{DB: d}
	v := sealedValues{kv: kv, box: box}
	if _, ok, err := v.GetValue(ctx, "copilot_token:1"); ok || err != nil {
		t.Fatalf("nothing put yet: %v %v", ok, err)
	}
	if err := v.PutValue(ctx, "copilot_token:1", `{"token":"tid=secret"}`); err != nil {
		t.Fatal(err)
	}
	raw, _, _ := kv.GetValue(ctx, "sealed.copilot_token:1")
	if raw == "" || strings.Contains(raw, "secret") {
		t.Fatalf("stored in clear or not at all: %q", raw)
	}
	if got, ok, err := v.GetValue(ctx, "copilot_token:1"); !ok || err != nil || got != `{"token":"tid=secret"}` {
		t.Fatalf("read back %q %v %v", got, ok, err)
	}
	if err := kv.PutValue(ctx, "sealed.copilot_token:2", raw); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.GetValue(ctx, "copilot_token:2"); err == nil {
		t.Fatal("a sealed value moved to another name opened")
	}
}

package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"switchyard/db"
	"switchyard/e2e/testenv"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// adminCall is a small admin API client for a separately running gateway.
func adminCall(base, method, path string, body any) (int, map[string]any, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+testenv.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, nil
}

// TestCrashSafety runs the real binary, saves settings and connections in a loop, kills it with
// SIGKILL at random moments and restarts it: the database must open, pass integrity_check, keep
// its migrations, and hold every write that was acknowledged before the kill.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	bin := testenv.BuildBinary(t)
	dir := t.TempDir()
	storeEnv, store := testenv.ProcessStore(t, dir)
	var ackedConns []string
	lastAckedBackoff := 0
	for round := 0; round < 6; round++ {
		addr := freeAddr(t)
		base := "http://" + addr
		cmd := exec.Command(bin, "serve", "--addr", addr, "--data-dir", dir, "--log-level", "warn")
		cmd.Env = append(append(os.Environ(), storeEnv...), "SWITCHYARD_ADMIN_TOKEN="+testenv.AdminToken, "SWITCHYARD_ADMIN_PASSWORD="+testenv.Password)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitReady(t, base)

		// Everything acknowledged before the last kill is there.
		_, conns, err := adminCall(base, "GET", "/api/connections", nil)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, it := range conns["items"].([]any) {
			have[it.(map[string]any)["name"].(string)] = true
		}
		for _, n := range ackedConns {
			if !have[n] {
				t.Fatalf("round %d: acknowledged connection %s lost", round, n)
			}
		}
		_, doc, _ := adminCall(base, "GET", "/api/settings/resilience", nil)
		got := int(doc["values"].(map[string]any)["retry"].(map[string]any)["max_backoff_ms"].(float64))
		if lastAckedBackoff > 0 && got < lastAckedBackoff {
			t.Fatalf("round %d: acknowledged setting %d lost (have %d)", round, lastAckedBackoff, got)
		}
		if round == 0 {
			if st, _, _ := adminCall(base, "POST", "/api/providers", map[string]any{"name": "crash", "type": "openai-compatible",
				"base_url": "http://127.0.0.1:9/v1"}); st != 201 {
				t.Fatalf("provider: %d", st)
			}
		}

		// Write in a loop until killed at a random moment.
		ctx, stop := context.WithCancel(context.Background())
		var mu sync.Mutex
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("c-%d-%d", round, i)
				st, _, err := adminCall(base, "POST", "/api/connections", map[string]any{"provider": "crash", "name": name,
					"auth_type": "api_key", "api_key": "sk-" + name})
				if err == nil && st == 201 {
					mu.Lock()
					ackedConns = append(ackedConns, name)
					mu.Unlock()
				}
				v := 30000 + round*1000 + i
				st, _, err = adminCall(base, "PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_backoff_ms": v}})
				if err == nil && st == 200 {
					mu.Lock()
					lastAckedBackoff = v
					mu.Unlock()
				}
			}
		}()
		time.Sleep(time.Duration(30+rand.IntN(200)) * time.Millisecond) // a random moment, not a timing assertion
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		stop()
		wg.Wait()

		// The store opens, is intact (the SQLite file checks itself) and fully migrated.
		d, err := db.Open(store)
		if err != nil {
			t.Fatal(err)
		}
		if d.Dialect == db.SQLite {
			var check string
			if err := d.W.Get(&check, "PRAGMA integrity_check"); err != nil || check != "ok" {
				t.Fatalf("round %d: integrity_check %q %v", round, check, err)
			}
		}
		cur, want, err := d.SchemaVersion(context.Background())
		if err != nil || cur != want {
			t.Fatalf("round %d: schema %d of %d: %v", round, cur, want, err)
		}
		d.Close()
	}
	if len(ackedConns) == 0 {
		t.Fatal("no write was acknowledged: the test proved nothing")
	}
}

func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("gateway never became ready")
}

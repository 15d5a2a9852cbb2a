package ops

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// TestRotatedTokensSurviveKillNine runs the real binary with a Claude account whose every
// request meets a revoked access token: the gateway refreshes (rotating the single-use refresh
// token) and serves the request with the new one. Right after such an answer the binary is
// killed with SIGKILL and started again: the next refresh must present the rotated refresh token
// (an older one is refused as burned), so nothing the answer depended on was lost.
func TestRotatedTokensSurviveKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	bin := testenv.BuildBinary(t)
	dir := t.TempDir()
	storeEnv, _ := testenv.ProcessStore(t, dir)
	f := testenv.NewFakeClaude(t, nil)
	var key string
	for round := 0; round < 5; round++ {
		addr := freeAddr(t)
		base := "http://" + addr
		cmd := exec.Command(bin, "serve", "--addr", addr, "--data-dir", dir, "--log-level", "warn")
		cmd.Env = append(append(os.Environ(), storeEnv...), "SWITCHYARD_ADMIN_TOKEN="+testenv.AdminToken, "SWITCHYARD_ADMIN_PASSWORD="+testenv.Password,
			"SWITCHYARD_CLAUDE_TOKEN_URL="+f.URL+"/v1/oauth/token", "SWITCHYARD_CLAUDE_USAGE_URL="+f.URL+"/api/oauth/usage")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitReady(t, base)
		if round == 0 {
			_, provs, _ := adminCall(base, "GET", "/api/providers", nil)
			for _, p := range provs["items"].([]any) {
				if m := p.(map[string]any); m["name"] == "anthropic" {
					if st, _, _ := adminCall(base, "PATCH", "/api/providers/"+itoa(int64(m["id"].(float64))), map[string]any{"base_url": f.URL}); st != 200 {
						t.Fatalf("provider: %d", st)
					}
				}
			}
			_, start, _ := adminCall(base, "POST", "/api/oauth/claude/start", map[string]any{})
			if st, out, _ := adminCall(base, "POST", "/api/oauth/claude/complete", map[string]any{"code": f.Authorize(start["auth_url"].(string), "ada@example.com")}); st != 201 {
				t.Fatalf("sign-in: %d %v", st, out)
			}
			_, k, _ := adminCall(base, "POST", "/api/keys", map[string]any{"name": "crash"})
			key = k["key"].(string)
		}
		// Each request meets a revoked token, refreshes and is served with the rotated pair.
		n := 1 + rand.IntN(3)
		for i := 0; i < n; i++ {
			f.RevokeAll()
			before := f.Refreshes.Load()
			req, _ := http.NewRequest("POST", base+"/v1/messages", bytes.NewReader([]byte(testenv.MessagesBody)))
			req.Header.Set("x-api-key", key)
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			body := testenv.ReadAll(t, resp)
			if resp.StatusCode != 200 || f.Refreshes.Load() != before+1 {
				t.Fatalf("round %d request %d: %d %s (refreshes %d → %d)", round, i, resp.StatusCode, body, before, f.Refreshes.Load())
			}
		}
		if err := cmd.Process.Kill(); err != nil { // right after the answer that used the rotated token
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if f.BurnedUses.Load() != 0 {
			t.Fatalf("round %d: a rotated-away refresh token was presented again", round)
		}
	}
}

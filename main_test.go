package main

import (
	"bytes"
	"testing"
)

func TestRunVersionAndHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, func(string) (string, bool) { return "", false }, &out, &errOut); code != 0 ||
		!bytes.HasPrefix(out.Bytes(), []byte("switchyard ")) {
		t.Fatalf("version: %d %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"--help"}, func(string) (string, bool) { return "", false }, &out, &errOut); code != 0 ||
		!bytes.Contains(errOut.Bytes(), []byte("SWITCHYARD_ADMIN_TOKEN")) {
		t.Fatalf("help: %d %q", code, errOut.String())
	}
	if code := run([]string{"frobnicate"}, func(string) (string, bool) { return "", false }, &out, &errOut); code != 2 {
		t.Fatalf("unknown command: %d", code)
	}
}

// An admin token shorter than 16 characters stops the process before it starts, saying why.
func TestRunRefusesAShortAdminToken(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "SWITCHYARD_ADMIN_TOKEN" {
			return "my-admin-token", true
		}
		return "", false
	}
	var out, errOut bytes.Buffer
	code := run([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, env, &out, &errOut)
	if code != 2 || !bytes.Contains(errOut.Bytes(), []byte("SWITCHYARD_ADMIN_TOKEN must be at least 16 characters long, not 14")) {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

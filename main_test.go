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

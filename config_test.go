package main

import (
	"bytes"
	"testing"
)

func TestParseConfig(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		cmd     string
		addr    string
		bodyMiB int64
		wantErr bool
	}{
		{"defaults", nil, nil, "serve", "127.0.0.1:8080", 32, false},
		{"env twin", nil, map[string]string{"SWITCHYARD_ADDR": ":9", "SWITCHYARD_MAX_BODY_MIB": "8"}, "serve", ":9", 8, false},
		{"flag beats env", []string{"serve", "--addr", ":7"}, map[string]string{"SWITCHYARD_ADDR": ":9"}, "serve", ":7", 32, false},
		{"version", []string{"version"}, nil, "version", "127.0.0.1:8080", 32, false},
		{"bad log format", []string{"--log-format", "xml"}, nil, "serve", "", 0, true},
		{"bad body limit", nil, map[string]string{"SWITCHYARD_MAX_BODY_MIB": "lots"}, "serve", "", 0, true},
		{"stray argument", []string{"serve", "extra"}, nil, "serve", "", 0, true},
	}
	for _, c := range cases {
		cfg, cmd, err := parseConfig(c.args, env(c.env), &bytes.Buffer{})
		if (err != nil) != c.wantErr {
			t.Errorf("%s: err %v", c.name, err)
			continue
		}
		if err == nil && (cmd != c.cmd || cfg.Addr != c.addr || cfg.MaxBodyMiB != c.bodyMiB) {
			t.Errorf("%s: cmd %s addr %s body %d", c.name, cmd, cfg.Addr, cfg.MaxBodyMiB)
		}
	}
}

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

package app

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
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
		{"bad read timeout", nil, map[string]string{"SWITCHYARD_READ_TIMEOUT": "soon"}, "serve", "", 0, true},
		{"zero read timeout", []string{"--read-timeout", "0s"}, nil, "serve", "", 0, true},
	}
	for _, c := range cases {
		cfg, cmd, err := ParseConfig(c.args, envOf(c.env), &bytes.Buffer{})
		if (err != nil) != c.wantErr {
			t.Errorf("%s: err %v", c.name, err)
			continue
		}
		if err == nil && (cmd != c.cmd || cfg.Addr != c.addr || cfg.MaxBodyMiB != c.bodyMiB) {
			t.Errorf("%s: cmd %s addr %s body %d", c.name, cmd, cfg.Addr, cfg.MaxBodyMiB)
		}
	}
}

// TestShutdownGraceHasAnEnvironmentTwin: like every flag, --shutdown-grace reads
// SWITCHYARD_SHUTDOWN_GRACE, and the flag beats it.
func TestShutdownGraceHasAnEnvironmentTwin(t *testing.T) {
	env := func(k string) (string, bool) {
		return map[string]string{"SWITCHYARD_SHUTDOWN_GRACE": "7s"}[k], k == "SWITCHYARD_SHUTDOWN_GRACE"
	}
	cfg, _, err := ParseConfig(nil, env, &bytes.Buffer{})
	if err != nil || cfg.ShutdownGrace != 7*time.Second {
		t.Fatalf("env: %v %v", cfg.ShutdownGrace, err)
	}
	cfg, _, err = ParseConfig([]string{"--shutdown-grace", "2s"}, env, &bytes.Buffer{})
	if err != nil || cfg.ShutdownGrace != 2*time.Second {
		t.Fatalf("flag: %v %v", cfg.ShutdownGrace, err)
	}
	bad := func(k string) (string, bool) { return "soon", k == "SWITCHYARD_SHUTDOWN_GRACE" }
	if _, _, err := ParseConfig(nil, bad, &bytes.Buffer{}); err == nil {
		t.Fatal("an unparsable SWITCHYARD_SHUTDOWN_GRACE was accepted")
	}
	var help bytes.Buffer
	ParseConfig([]string{"--help"}, env, &help)
	for _, line := range strings.Split(help.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "-") {
			continue // the flag's name line; its usage text follows
		}
		if strings.Contains(line, "shutdown") && !strings.Contains(line, "SWITCHYARD_SHUTDOWN_GRACE") {
			t.Fatalf("--help does not name the environment twin: %q", line)
		}
	}
}

// The list settings take a comma-separated list and have an environment twin that the flag
// replaces as a whole; --public-host is repeatable too, and its names are kept in lower case
// without port.
func TestListSettings(t *testing.T) {
	cases := []struct {
		name           string
		envKey, envVal string
		envWant        string // the list the environment gives, joined by spaces
		args           []string
		argsWant       string
		flag           string   // the flag that refuses bad
		bad            []string // values the flag refuses
		get            func(Config) []string
	}{
		{name: "trusted proxies", envKey: "SWITCHYARD_TRUSTED_PROXIES", envVal: "10.0.0.0/8", envWant: "10.0.0.0/8",
			args: []string{"--trusted-proxies", " 192.168.1.5, fd00::/8 ,::1"}, argsWant: "192.168.1.5/32 fd00::/8 ::1/128",
			flag: "--trusted-proxies", bad: []string{"10.0.0.0/33", "proxy.local", "10.0.0.0/8;10.1.0.0/16"},
			get: func(c Config) []string {
				var nets []string
				for _, n := range c.TrustedProxies {
					nets = append(nets, n.String())
				}
				return nets
			}},
		{name: "public hosts", envKey: "SWITCHYARD_PUBLIC_HOSTS", envVal: "Gateway.Example.com, gw.internal:8443",
			envWant:  "gateway.example.com gw.internal",
			args:     []string{"--public-host", "a.example", "--public-host", "[2001:DB8::1]:443,b.example."},
			argsWant: "a.example 2001:db8::1 b.example",
			flag:     "--public-host", bad: []string{"https://gw.example", "gw.example/v1", "-gw.example", "gw..example", "gw.example:http"},
			get: func(c Config) []string { return c.PublicHosts }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := envOf(map[string]string{tc.envKey: tc.envVal})
			cfg, _, err := ParseConfig(nil, envOf(nil), &bytes.Buffer{})
			if err != nil || len(tc.get(cfg)) != 0 {
				t.Fatalf("default: %v %v", tc.get(cfg), err)
			}
			cfg, _, err = ParseConfig(nil, env, &bytes.Buffer{})
			if err != nil || strings.Join(tc.get(cfg), " ") != tc.envWant {
				t.Fatalf("env: %v %v", tc.get(cfg), err)
			}
			cfg, _, err = ParseConfig(tc.args, env, &bytes.Buffer{})
			if err != nil || strings.Join(tc.get(cfg), " ") != tc.argsWant {
				t.Fatalf("flags: %v %v", tc.get(cfg), err)
			}
			for _, bad := range tc.bad {
				if _, _, err := ParseConfig([]string{tc.flag, bad}, envOf(nil), &bytes.Buffer{}); err == nil {
					t.Errorf("%q accepted", bad)
				}
			}
			var help bytes.Buffer
			ParseConfig([]string{"--help"}, envOf(nil), &help)
			if !strings.Contains(help.String(), strings.TrimPrefix(tc.flag, "-")) || !strings.Contains(help.String(), tc.envKey) {
				t.Errorf("--help lacks %s: %s", tc.flag, help.String())
			}
		})
	}
}

// envOf looks names up in m, as os.LookupEnv does in the environment.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConnectionLimits(t *testing.T) {
	cfg, _, err := ParseConfig(nil, envOf(nil), &bytes.Buffer{})
	if err != nil || cfg.MaxConnsPerClient != DefaultMaxConnsPerClient || cfg.AnonymousIdleTimeout != DefaultAnonymousIdleTimeout {
		t.Fatalf("defaults: %d %v %v", cfg.MaxConnsPerClient, cfg.AnonymousIdleTimeout, err)
	}
	cfg, _, err = ParseConfig(nil, envOf(map[string]string{"SWITCHYARD_MAX_CONNS_PER_CLIENT": "0", "SWITCHYARD_ANONYMOUS_IDLE_TIMEOUT": "2s"}), &bytes.Buffer{})
	if err != nil || cfg.MaxConnsPerClient != 0 || cfg.AnonymousIdleTimeout != 2*time.Second {
		t.Fatalf("env: %d %v %v", cfg.MaxConnsPerClient, cfg.AnonymousIdleTimeout, err)
	}
	cfg, _, err = ParseConfig([]string{"--max-conns-per-client", "16", "--anonymous-idle-timeout", "750ms"},
		envOf(map[string]string{"SWITCHYARD_MAX_CONNS_PER_CLIENT": "0"}), &bytes.Buffer{})
	if err != nil || cfg.MaxConnsPerClient != 16 || cfg.AnonymousIdleTimeout != 750*time.Millisecond {
		t.Fatalf("flags: %d %v %v", cfg.MaxConnsPerClient, cfg.AnonymousIdleTimeout, err)
	}
	for name, m := range map[string]map[string]string{
		"negative cap":      {"SWITCHYARD_MAX_CONNS_PER_CLIENT": "-1"},
		"unparsable cap":    {"SWITCHYARD_MAX_CONNS_PER_CLIENT": "many"},
		"zero idle timeout": {"SWITCHYARD_ANONYMOUS_IDLE_TIMEOUT": "0s"},
		"bad idle timeout":  {"SWITCHYARD_ANONYMOUS_IDLE_TIMEOUT": "soon"},
	} {
		if _, _, err := ParseConfig(nil, envOf(m), &bytes.Buffer{}); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	var help bytes.Buffer
	ParseConfig([]string{"--help"}, envOf(nil), &help)
	for _, want := range []string{"-max-conns-per-client", "SWITCHYARD_MAX_CONNS_PER_CLIENT", "-anonymous-idle-timeout",
		"SWITCHYARD_ANONYMOUS_IDLE_TIMEOUT"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help lacks %s", want)
		}
	}
}

// An admin token shorter than 16 characters is refused: it could be guessed.
func TestAdminTokenLength(t *testing.T) {
	for tok, ok := range map[string]bool{"": true, "my-admin-token": false, "0123456789abcde": false, "0123456789abcdef": true} {
		env := func(k string) (string, bool) { return tok, k == "SWITCHYARD_ADMIN_TOKEN" }
		if _, _, err := ParseConfig(nil, env, &bytes.Buffer{}); (err == nil) != ok {
			t.Errorf("token %q: %v", tok, err)
		}
	}
}

// The lease time of slots held in Redis is 15 s unless set, between 1 s and 5 min.
func TestCapLeaseTTL(t *testing.T) {
	cfg, _, err := ParseConfig(nil, envOf(nil), &bytes.Buffer{})
	if err != nil || cfg.CapLeaseTTL != 15*time.Second {
		t.Fatalf("default: %v %v", cfg.CapLeaseTTL, err)
	}
	cfg, _, err = ParseConfig([]string{"--cap-lease-ttl", "2s"}, envOf(map[string]string{"SWITCHYARD_CAP_LEASE_TTL": "1m"}), &bytes.Buffer{})
	if err != nil || cfg.CapLeaseTTL != 2*time.Second {
		t.Fatalf("flag over env: %v %v", cfg.CapLeaseTTL, err)
	}
	for _, v := range []string{"500ms", "6m", "soon"} {
		if _, _, err := ParseConfig(nil, envOf(map[string]string{"SWITCHYARD_CAP_LEASE_TTL": v}), &bytes.Buffer{}); err == nil {
			t.Errorf("SWITCHYARD_CAP_LEASE_TTL=%s accepted", v)
		}
	}
}

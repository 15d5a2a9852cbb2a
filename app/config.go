package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
	"switchyard/services/auth"
	"switchyard/services/globalcap"
	"switchyard/web"
)

// Config is the bootstrap configuration: flags with environment twins. Runtime settings live
// in the database, never here.
type Config struct {
	// Addr is the listen address (default 127.0.0.1:8080).
	Addr string
	// DataDir holds switchyard.db and the generated secret key (default ./data).
	DataDir string
	// DatabaseURL, when set (postgres://…), puts the store in PostgreSQL instead of
	// DataDir/switchyard.db: the one store several replicas share.
	DatabaseURL string
	// RedisURL, when set (redis://…), holds every connection's max_concurrent and queue depth
	// across the replicas in Redis, as leases that expire with a replica that dies.
	RedisURL string
	// CapLeaseTTL is how long a concurrency slot held in Redis outlives its replica's last
	// renewal: the longest a replica that dies keeps its slots (default 15 s).
	CapLeaseTTL time.Duration
	LogLevel    string
	LogFormat   string
	// AdminPassword, AdminToken and SecretKey come from the environment only.
	AdminPassword string
	AdminToken    string
	SecretKey     string
	// ShutdownGrace is how long in-flight requests and streams may finish on shutdown (default 30 s).
	ShutdownGrace time.Duration
	// MaxBodyMiB limits a client request body; larger ones get 413 (default 32).
	MaxBodyMiB int64
	// ReadTimeout is how long a client may take to send a request's headers and (but for
	// authenticated proxy calls, whose bodies may be large and slow) its body (default 10 s;
	// 0 in a Config built by hand means the default).
	ReadTimeout time.Duration
	// TrustedProxies are the networks of reverse proxies whose X-Forwarded-For / X-Real-IP
	// headers name the client and whose X-Forwarded-Proto says it came over TLS (default none:
	// the client is always the direct peer, over the connection's own scheme).
	TrustedProxies []*net.IPNet
	// MaxConnsPerClient is how many connections one client address may keep idle while no request
	// on them authenticated; past it, a connection is closed after its answer (default 64; 0 = no
	// cap). Trusted proxies are exempt.
	MaxConnsPerClient int64
	// AnonymousIdleTimeout is how long a keep-alive connection on which no request authenticated
	// may stay idle (default 5 s; authenticated connections get two minutes; 0 in a Config built
	// by hand means the default).
	AnonymousIdleTimeout time.Duration
	// PublicHosts are the names (and addresses) the gateway answers to besides loopback and its
	// listen address; a request for another Host gets 421, but for proxy calls with a valid
	// client key (DNS rebinding). Lower case, without port.
	PublicHosts []string
	// RequestLogDays is how many days the request log keeps (default 7; 0 keeps none, the
	// traffic charts are kept either way).
	RequestLogDays int64
	// RequestLogRows bounds the request log; the oldest rows go first (default 100,000).
	RequestLogRows int64
	// RequestLogBodyKiB is how much of each request's and answer's body the request log keeps,
	// truncated and redacted, in KiB (default 0: no body is kept; at most MaxRequestLogBodyKiB).
	RequestLogBodyKiB int64
	// Clock drives every resilience timer; nil = the real clock (tests inject a fake one).
	Clock clockwork.Clock
}

// MaxRequestLogBodyKiB is the largest --request-log-body-kib.
const MaxRequestLogBodyKiB = 256

// DefaultReadTimeout is the default of --read-timeout.
const DefaultReadTimeout = 10 * time.Second

// DefaultAnonymousIdleTimeout is the default of --anonymous-idle-timeout.
const DefaultAnonymousIdleTimeout = 5 * time.Second

// DefaultMaxConnsPerClient is the default of --max-conns-per-client.
const DefaultMaxConnsPerClient = 64

// Usage is the head of --help.
const Usage = `Switchyard — a self-hosted LLM gateway.

Usage:
  switchyard [serve] [flags]   start the gateway (the default)
  switchyard version           print the version
  switchyard --help            show this help

Flags (each has an environment twin):
`

// ParseConfig reads the command and its flags; each flag falls back to its environment twin.
// The command is "serve" unless the first argument names another.
func ParseConfig(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (Config, string, error) {
	env := func(k, def string) string {
		if v, ok := lookupEnv(k); ok && v != "" {
			return v
		}
		return def
	}
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var c Config
	grace, graceErr := time.ParseDuration(env("SWITCHYARD_SHUTDOWN_GRACE", "30s"))
	readTimeout, readErr := time.ParseDuration(env("SWITCHYARD_READ_TIMEOUT", DefaultReadTimeout.String()))
	anonIdle, anonIdleErr := time.ParseDuration(env("SWITCHYARD_ANONYMOUS_IDLE_TIMEOUT", DefaultAnonymousIdleTimeout.String()))
	capTTL, capTTLErr := time.ParseDuration(env("SWITCHYARD_CAP_LEASE_TTL", globalcap.DefaultLeaseTTL.String()))
	fs := flag.NewFlagSet("switchyard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Addr, "addr", env("SWITCHYARD_ADDR", "127.0.0.1:8080"), "listen address (SWITCHYARD_ADDR)")
	fs.StringVar(&c.DataDir, "data-dir", env("SWITCHYARD_DATA_DIR", "./data"), "data directory holding switchyard.db (SWITCHYARD_DATA_DIR)")
	fs.StringVar(&c.DatabaseURL, "database-url", env("SWITCHYARD_DATABASE_URL", ""),
		"postgres://… URL of a PostgreSQL database to keep everything in instead of the data dir's SQLite file; replicas sharing one database share providers, keys, settings and resilience state (SWITCHYARD_DATABASE_URL)")
	fs.StringVar(&c.RedisURL, "redis-url", env("SWITCHYARD_REDIS_URL", ""),
		"redis:// URL of a Redis that holds the concurrency caps of the replicas sharing --database-url, so max_concurrent and the queue depth hold across all of them (SWITCHYARD_REDIS_URL)")
	fs.DurationVar(&c.CapLeaseTTL, "cap-lease-ttl", capTTL,
		"how long a concurrency slot held in Redis outlives its replica's last renewal, so the longest a replica that dies keeps its slots; 1s to 5m (SWITCHYARD_CAP_LEASE_TTL)")
	fs.StringVar(&c.LogLevel, "log-level", env("SWITCHYARD_LOG_LEVEL", "info"), "debug, info, warn or error (SWITCHYARD_LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", env("SWITCHYARD_LOG_FORMAT", "text"), "text or json (SWITCHYARD_LOG_FORMAT)")
	fs.Int64Var(&c.MaxBodyMiB, "max-body-mib", envInt(lookupEnv, "SWITCHYARD_MAX_BODY_MIB", 32),
		"largest client request body in MiB; larger ones get 413 (SWITCHYARD_MAX_BODY_MIB)")
	fs.Int64Var(&c.RequestLogDays, "request-log-days", envInt(lookupEnv, "SWITCHYARD_REQUEST_LOG_DAYS", 7),
		"days the request log keeps; 0 keeps none (SWITCHYARD_REQUEST_LOG_DAYS)")
	fs.Int64Var(&c.RequestLogRows, "request-log-rows", envInt(lookupEnv, "SWITCHYARD_REQUEST_LOG_ROWS", 100_000),
		"most rows the request log keeps (SWITCHYARD_REQUEST_LOG_ROWS)")
	fs.Int64Var(&c.RequestLogBodyKiB, "request-log-body-kib", envInt(lookupEnv, "SWITCHYARD_REQUEST_LOG_BODY_KIB", 0),
		"KiB of each request's and answer's body the request log keeps, truncated and redacted; 0 keeps none (SWITCHYARD_REQUEST_LOG_BODY_KIB)")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", grace,
		"how long in-flight requests and streams may finish on shutdown (SWITCHYARD_SHUTDOWN_GRACE)")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", readTimeout,
		"how long a client may take to send a request's headers and, but for authenticated proxy calls, its body (SWITCHYARD_READ_TIMEOUT)")
	var trusted string
	fs.StringVar(&trusted, "trusted-proxies", env("SWITCHYARD_TRUSTED_PROXIES", ""),
		"comma-separated CIDRs (or addresses) of reverse proxies whose X-Forwarded-For, X-Real-IP and X-Forwarded-Proto are believed; none by default (SWITCHYARD_TRUSTED_PROXIES)")
	fs.Int64Var(&c.MaxConnsPerClient, "max-conns-per-client", envInt(lookupEnv, "SWITCHYARD_MAX_CONNS_PER_CLIENT", DefaultMaxConnsPerClient),
		"idle connections one client address may keep while no request on them authenticated (more are closed after their answer); 0 = no cap; trusted proxies are exempt (SWITCHYARD_MAX_CONNS_PER_CLIENT)")
	fs.DurationVar(&c.AnonymousIdleTimeout, "anonymous-idle-timeout", anonIdle,
		"how long a keep-alive connection may stay idle while no request on it authenticated (SWITCHYARD_ANONYMOUS_IDLE_TIMEOUT)")
	publicHosts := hostList{list: splitList(env("SWITCHYARD_PUBLIC_HOSTS", ""))}
	fs.Var(&publicHosts, "public-host",
		"a name (or address) clients reach the gateway by, besides loopback and the listen address; repeatable; requests for other hosts get 421 (SWITCHYARD_PUBLIC_HOSTS, comma-separated)")
	fs.Usage = func() {
		fmt.Fprint(stderr, Usage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, `
Environment only:
  SWITCHYARD_ADMIN_PASSWORD  dashboard password (generated and printed once when unset on first start)
  SWITCHYARD_ADMIN_TOKEN     lets automation call /api/* with Authorization: Bearer <token> (at least 16 characters)
  SWITCHYARD_SECRET_KEY      encrypts provider credentials at rest (generated into the data dir when unset;
                             required with --database-url: every replica needs the same key)
`)
	}
	if err := fs.Parse(args); err != nil {
		return c, cmd, err
	}
	if fs.NArg() > 0 {
		return c, cmd, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if graceErr != nil {
		return c, cmd, fmt.Errorf("SWITCHYARD_SHUTDOWN_GRACE: %w", graceErr)
	}
	if readErr != nil {
		return c, cmd, fmt.Errorf("SWITCHYARD_READ_TIMEOUT: %w", readErr)
	}
	if anonIdleErr != nil {
		return c, cmd, fmt.Errorf("SWITCHYARD_ANONYMOUS_IDLE_TIMEOUT: %w", anonIdleErr)
	}
	if capTTLErr != nil {
		return c, cmd, fmt.Errorf("SWITCHYARD_CAP_LEASE_TTL: %w", capTTLErr)
	}
	if c.CapLeaseTTL < time.Second || c.CapLeaseTTL > 5*time.Minute {
		return c, cmd, fmt.Errorf("--cap-lease-ttl must be between 1s and 5m, not %s", c.CapLeaseTTL)
	}
	if c.AnonymousIdleTimeout <= 0 {
		return c, cmd, fmt.Errorf("--anonymous-idle-timeout must be positive, not %s", c.AnonymousIdleTimeout)
	}
	if c.MaxConnsPerClient < 0 || c.MaxConnsPerClient > 1_000_000 {
		return c, cmd, fmt.Errorf("--max-conns-per-client must be between 0 and 1000000, not %d", c.MaxConnsPerClient)
	}
	if c.ReadTimeout <= 0 {
		return c, cmd, fmt.Errorf("--read-timeout must be positive, not %s", c.ReadTimeout)
	}
	if c.ShutdownGrace < 0 {
		return c, cmd, fmt.Errorf("--shutdown-grace must not be negative, not %s", c.ShutdownGrace)
	}
	if c.MaxBodyMiB < 1 || c.MaxBodyMiB > 1024 {
		return c, cmd, fmt.Errorf("--max-body-mib must be between 1 and 1024, not %d", c.MaxBodyMiB)
	}
	var err error
	if c.TrustedProxies, err = ParseCIDRs(trusted); err != nil {
		return c, cmd, fmt.Errorf("--trusted-proxies: %w", err)
	}
	if c.PublicHosts, err = ParseHosts(publicHosts.list); err != nil {
		return c, cmd, fmt.Errorf("--public-host: %w", err)
	}
	if c.RequestLogDays < 0 || c.RequestLogDays > 3650 {
		return c, cmd, fmt.Errorf("--request-log-days must be between 0 and 3650, not %d", c.RequestLogDays)
	}
	if c.RequestLogRows < 100 || c.RequestLogRows > 100_000_000 {
		return c, cmd, fmt.Errorf("--request-log-rows must be between 100 and 100000000, not %d", c.RequestLogRows)
	}
	if c.RequestLogBodyKiB < 0 || c.RequestLogBodyKiB > MaxRequestLogBodyKiB {
		return c, cmd, fmt.Errorf("--request-log-body-kib must be between 0 and %d, not %d", MaxRequestLogBodyKiB, c.RequestLogBodyKiB)
	}
	c.AdminPassword = env("SWITCHYARD_ADMIN_PASSWORD", "")
	c.AdminToken = env("SWITCHYARD_ADMIN_TOKEN", "")
	if err := auth.CheckTokenStrength(c.AdminToken); err != nil {
		return c, cmd, err
	}
	c.SecretKey = env("SWITCHYARD_SECRET_KEY", "")
	if c.DatabaseURL != "" {
		if !db.IsPostgresURL(c.DatabaseURL) {
			return c, cmd, errors.New("--database-url must be a postgres:// or postgresql:// URL (leave it unset for the data dir's SQLite file)")
		}
		if strings.TrimSpace(c.SecretKey) == "" {
			return c, cmd, errors.New("SWITCHYARD_SECRET_KEY must be set with --database-url: every replica sharing the database must seal and open credentials with the same key")
		}
	}
	if c.RedisURL != "" && c.DatabaseURL == "" {
		return c, cmd, errors.New("--redis-url needs --database-url: Redis holds the caps of replicas that share a PostgreSQL store")
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return c, cmd, fmt.Errorf("--log-format must be text or json, not %q", c.LogFormat)
	}
	return c, cmd, nil
}

// ParseCIDRs reads a comma-separated list of CIDRs; a bare address stands for itself alone.
func ParseCIDRs(list string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			ip := net.ParseIP(f)
			if ip == nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an address", f)
			}
			bits := 128
			if ip4 := ip.To4(); ip4 != nil {
				ip, bits = ip4, 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR nor an address", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// hostList is a repeatable flag: the environment's list until the first flag replaces it (a flag
// given on the command line wins over its environment twin).
type hostList struct {
	list []string
	set  bool
}

func (h *hostList) String() string { return strings.Join(h.list, ",") }

func (h *hostList) Set(v string) error {
	if !h.set {
		h.list, h.set = nil, true
	}
	h.list = append(h.list, splitList(v)...)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ParseHosts checks public host names: a DNS name or an IP address, optionally with a port
// (ignored: a name is accepted on every port). They are returned in lower case, without port.
func ParseHosts(list []string) ([]string, error) {
	var out []string
	for _, h := range list {
		name := strings.ToLower(h)
		if host, port, err := net.SplitHostPort(name); err == nil {
			if _, err := strconv.ParseUint(port, 10, 16); err != nil {
				return nil, fmt.Errorf("%q: bad port", h)
			}
			name = host
		}
		name = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]"), ".")
		if net.ParseIP(name) == nil && !validHostName(name) {
			return nil, fmt.Errorf("%q is neither a host name nor an address (no scheme or path: gateway.example.com)", h)
		}
		out = append(out, name)
	}
	return out, nil
}

// validHostName reports whether s is a DNS name: dot-separated labels of letters, digits and
// hyphens, none empty, none starting or ending with a hyphen.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// envInt reads an integer environment variable; an unparsable value is reported as out of range.
func envInt(lookupEnv func(string) (string, bool), key string, def int64) int64 {
	v, ok := lookupEnv(key)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1 // out of range: ParseConfig reports it
	}
	return n
}

// LogFlushEvery is how long a log line waits at most to be written with the ones after it; a
// line at warn or above is written at once.
const LogFlushEvery = 100 * time.Millisecond

// NewLogger builds the one logger of the process from the configuration. Its lines are written
// together every LogFlushEvery (web.NewBufferedLogHandler); CloseLogger writes what waits.
func NewLogger(c Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	// slog's text or JSON handler; the request line, written for every request, is formatted by
	// hand to the same bytes (web.LogHandler).
	return slog.New(web.NewBufferedLogHandler(w, c.LogFormat == "json", level, LogFlushEvery)), nil
}

// FlushLogger writes the lines a logger from NewLogger holds back.
func FlushLogger(l *slog.Logger) {
	if h, ok := l.Handler().(*web.LogHandler); ok {
		h.Flush()
	}
}

// CloseLogger writes the lines a logger from NewLogger holds back, and every later line at once.
func CloseLogger(l *slog.Logger) {
	if h, ok := l.Handler().(*web.LogHandler); ok {
		h.Close()
	}
}

// Command switchyard is a self-hosted LLM gateway. This file is the only composition root:
// config → database → services → web → serve → shutdown.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/labstack/echo/v4"

	"switchyard/db"
	"switchyard/handlers"
	"switchyard/services/auth"
	"switchyard/services/catalog"
	"switchyard/services/clientkeys"
	"switchyard/services/health"
	"switchyard/services/metrics"
	"switchyard/services/proxy"
	"switchyard/services/resilience"
	"switchyard/services/secrets"
	"switchyard/services/settings"
	"switchyard/services/writebehind"
	"switchyard/static"
	"switchyard/web"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// Config is the bootstrap configuration: flags with environment twins. Runtime settings live
// in the database, never here.
type Config struct {
	Addr          string
	DataDir       string
	LogLevel      string
	LogFormat     string
	AdminPassword string
	AdminToken    string
	SecretKey     string
	ShutdownGrace time.Duration
	// MaxBodyMiB limits a client request body; larger ones get 413.
	MaxBodyMiB int64
	// Clock drives every resilience timer; nil = the real clock (tests inject a fake one).
	Clock clockwork.Clock
}

const usage = `Switchyard — a self-hosted LLM gateway.

Usage:
  switchyard [serve] [flags]   start the gateway (the default)
  switchyard version           print the version
  switchyard --help            show this help

Flags (each has an environment twin):
`

func parseConfig(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (Config, string, error) {
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
	fs := flag.NewFlagSet("switchyard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Addr, "addr", env("SWITCHYARD_ADDR", "127.0.0.1:8080"), "listen address (SWITCHYARD_ADDR)")
	fs.StringVar(&c.DataDir, "data-dir", env("SWITCHYARD_DATA_DIR", "./data"), "data directory holding switchyard.db (SWITCHYARD_DATA_DIR)")
	fs.StringVar(&c.LogLevel, "log-level", env("SWITCHYARD_LOG_LEVEL", "info"), "debug, info, warn or error (SWITCHYARD_LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", env("SWITCHYARD_LOG_FORMAT", "text"), "text or json (SWITCHYARD_LOG_FORMAT)")
	fs.Int64Var(&c.MaxBodyMiB, "max-body-mib", envInt(lookupEnv, "SWITCHYARD_MAX_BODY_MIB", 32),
		"largest client request body in MiB; larger ones get 413 (SWITCHYARD_MAX_BODY_MIB)")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", 30*time.Second, "how long in-flight requests and streams may finish on shutdown")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, `
Environment only:
  SWITCHYARD_ADMIN_PASSWORD  dashboard password (generated and printed once when unset on first start)
  SWITCHYARD_ADMIN_TOKEN     lets automation call /api/* with Authorization: Bearer <token>
  SWITCHYARD_SECRET_KEY      encrypts secrets at rest and signs sessions (generated into the data dir when unset)
`)
	}
	if err := fs.Parse(args); err != nil {
		return c, cmd, err
	}
	if fs.NArg() > 0 {
		return c, cmd, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.MaxBodyMiB < 1 || c.MaxBodyMiB > 1024 {
		return c, cmd, fmt.Errorf("--max-body-mib must be between 1 and 1024, not %d", c.MaxBodyMiB)
	}
	c.AdminPassword = env("SWITCHYARD_ADMIN_PASSWORD", "")
	c.AdminToken = env("SWITCHYARD_ADMIN_TOKEN", "")
	c.SecretKey = env("SWITCHYARD_SECRET_KEY", "")
	switch c.LogFormat {
	case "text", "json":
	default:
		return c, cmd, fmt.Errorf("--log-format must be text or json, not %q", c.LogFormat)
	}
	return c, cmd, nil
}

// envInt reads an integer environment variable; an unparsable value keeps def (the flag
// parser then reports nothing, so it is rejected here instead).
func envInt(lookupEnv func(string) (string, bool), key string, def int64) int64 {
	v, ok := lookupEnv(key)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1 // out of range: parseConfig reports it
	}
	return n
}

func newLogger(c Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

func run(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	cfg, cmd, err := parseConfig(args, lookupEnv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "switchyard:", err)
		return 2
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "switchyard", version)
		return 0
	case "serve":
	case "help":
		fmt.Fprint(stderr, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "switchyard: unknown command %q (try --help)\n", cmd)
		return 2
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "switchyard:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app, err := Start(ctx, cfg, lookupEnv, log)
	if err != nil {
		log.Error("start failed", "error", err)
		return 1
	}
	<-ctx.Done()
	stop()
	log.Info("shutting down", "grace", cfg.ShutdownGrace)
	if err := app.Shutdown(cfg.ShutdownGrace); err != nil {
		log.Error("shutdown", "error", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// App is a running gateway; end-to-end tests start it exactly as production does.
type App struct {
	Addr   string // the address actually listened on
	DB     *db.DB
	Echo   *echo.Echo
	Routes []web.Route
	Log    *slog.Logger
	// Inventory is the model discovery, exposed for end-to-end tests.
	Inventory *proxy.Inventory

	server   *http.Server
	draining atomic.Bool
	cancel   context.CancelFunc
	bg       sync.WaitGroup
	served   chan error
}

// Start opens the database, builds every service and starts serving on cfg.Addr.
func Start(ctx context.Context, cfg Config, lookupEnv func(string) (string, bool), log *slog.Logger) (*App, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	key, created, err := secrets.LoadOrCreateKey(cfg.DataDir, cfg.SecretKey)
	if err != nil {
		return nil, err
	}
	if created {
		log.Info("generated a new secret key", "file", filepath.Join(cfg.DataDir, secrets.KeyFileName))
	}
	box, err := secrets.NewBox(key)
	if err != nil {
		return nil, err
	}
	d, err := db.Open(filepath.Join(cfg.DataDir, "switchyard.db"))
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	if n, err := d.Migrate(ctx); err != nil {
		return nil, err
	} else if n > 0 {
		log.Info("applied migrations", "count", n)
	}
	kv := db.KV{DB: d}
	authSvc, generated, err := auth.Init(ctx, kv, cfg.AdminPassword, cfg.AdminToken, time.Now)
	if err != nil {
		return nil, err
	}
	if generated != "" {
		log.Warn("generated the admin password; it is shown only this once — log in and keep it safe, or set SWITCHYARD_ADMIN_PASSWORD",
			"password", generated)
	}
	cat, err := catalog.New(ctx, d, box, log)
	if err != nil {
		return nil, err
	}
	keys, err := clientkeys.New(ctx, d, log, time.Now)
	if err != nil {
		return nil, err
	}
	setSvc, err := settings.New(ctx, kv, lookupEnv, time.Now)
	if err != nil {
		return nil, err
	}
	for _, w := range setSvc.Warnings() {
		log.Warn(w)
	}
	clock := cfg.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	stateQueue := writebehind.New("connection_state", log, func(ctx context.Context, batch map[int64]resilience.ConnState) error {
		return resilience.SaveConnStates(ctx, d, batch)
	})
	cooldowns := resilience.NewCooldowns(clock, func(st resilience.ConnState) { stateQueue.Put(st.ConnectionID, st) })
	states, err := resilience.LoadConnStates(ctx, d)
	if err != nil {
		return nil, err
	}
	cooldowns.Load(states)
	cat.OnNewCredentials(func(id int64) { cooldowns.Clear(id, true) })

	breakerQueue := writebehind.New("breaker_state", log, func(ctx context.Context, batch map[resilience.BreakerKey]resilience.BreakerState) error {
		return resilience.SaveBreakerStates(ctx, d, batch)
	})
	breakers := resilience.NewBreakers(clock, func(st resilience.BreakerState) { breakerQueue.Put(st.Key(), st) })
	healthTracker := health.New(clock)
	breakers.OnTransition(func(provider, model string, from, to resilience.CircuitState) {
		if to != resilience.CircuitNone {
			log.Info("circuit breaker", "provider", provider, "model", model, "from", string(from), "to", string(to))
		}
		if from == resilience.CircuitHalfOpen && to == resilience.CircuitClosed {
			healthTracker.Reset(provider) // the provider proved itself; old failures no longer describe it
		}
	})
	breakerStates, err := resilience.LoadBreakerStates(ctx, d)
	if err != nil {
		return nil, err
	}
	breakers.Load(breakerStates)
	gate := resilience.NewProviderGate(clock)

	lockoutQueue := writebehind.New("model_lockouts", log, func(ctx context.Context, batch map[resilience.LockoutKey]*resilience.Lockout) error {
		return resilience.SaveLockouts(ctx, d, batch)
	})
	lockouts := resilience.NewLockouts(clock, lockoutConfig(setSvc.Snapshot()), lockoutQueue.Put)
	lockoutRows, err := resilience.LoadLockouts(ctx, d)
	if err != nil {
		return nil, err
	}
	lockouts.Load(lockoutRows)
	setSvc.OnChange(func(s *settings.Snapshot) { lockouts.SetConfig(lockoutConfig(s)) })

	cat.OnConnectionDeleted(func(id int64) {
		cooldowns.Forget(id)
		lockouts.ForgetConnection(id)
	})
	client := &http.Client{Transport: proxy.NewTransport()}
	inv := proxy.NewInventory(client, cat.Registry, log, clock)
	cat.OnChange(func(*catalog.Registry) { inv.Kick() })
	mets := metrics.New()
	queues := resilience.NewQueues(clock, func(connID int64, waited time.Duration, outcome string) {
		if c, ok := cat.Registry().Connection(connID); ok {
			mets.QueueWait(c.Provider, c.Name, outcome, waited)
		}
	})
	semaphores := resilience.NewSemaphores(clock)
	cat.OnConnectionDeleted(func(id int64) {
		queues.Forget(id)
		semaphores.Forget(id)
	})
	engine := proxy.New(proxy.Options{Catalog: cat, Inventory: inv, Client: client, Log: log,
		Settings: setSvc, Cooldowns: cooldowns, Breakers: breakers, Gate: gate, Health: healthTracker, Lockouts: lockouts,
		Queues: queues, Semaphores: semaphores,
		Clock: clock, Observer: mets})
	breakers.OnTransition(func(provider, _ string, _, to resilience.CircuitState) {
		if to != resilience.CircuitNone {
			mets.BreakerTransition(provider, string(to))
		}
	})
	engine.RegisterGauges(mets)

	app := &App{DB: d, Log: log, Inventory: inv, served: make(chan error, 1)}
	sessions := handlers.NewSessions(secrets.Derive(key, "session-hash v1", 64), secrets.Derive(key, "session-block v1", 32))
	settingsH := &handlers.Settings{Svc: setSvc, Providers: cat}
	api := &handlers.API{Catalog: cat, Tester: engine, Cooldowns: cooldowns, Lockouts: lockouts, Breakers: breakers,
		Statuses: engine.ProviderStatuses, Queues: queues, Semaphores: semaphores,
		ValidateProviderOverrides:   settings.CheckProviderOverrides,
		ValidateConnectionOverrides: settings.CheckConnectionOverrides}
	e, routes := web.New(web.Deps{
		Log: log, Auth: authSvc, Keys: keys, Sessions: sessions, Static: static.FS, Metrics: mets,
		Health:   &handlers.Health{DB: d, Draining: &app.draining, Version: version},
		API:      api,
		KeysAPI:  &handlers.Keys{Keys: keys},
		Settings: settingsH,
		Proxy:    &handlers.Proxy{Engine: engine, Inventory: inv, MaxBodyBytes: cfg.MaxBodyMiB << 20},
		Dashboard: &handlers.Dashboard{Auth: authSvc, Sessions: sessions, Catalog: cat, Keys: keys, Tester: engine,
			Inventory: inv, Settings: settingsH, API: api},
	})
	app.Echo, app.Routes = e, routes

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	app.Addr = ln.Addr().String()
	app.server = &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}

	bgCtx, cancel := context.WithCancel(context.Background())
	app.cancel = cancel
	app.bg.Add(6)
	go func() { defer app.bg.Done(); breakerQueue.Run(bgCtx) }()
	go func() { defer app.bg.Done(); lockoutQueue.Run(bgCtx) }()
	go func() { defer app.bg.Done(); lockouts.RunSweeper(bgCtx, resilience.LockoutSweepInterval) }()
	go func() {
		defer app.bg.Done()
		inv.Run(bgCtx, func() (time.Duration, time.Duration) {
			d := setSvc.Snapshot().Resilience().Discovery
			return time.Duration(d.ModelRefreshIntervalMS) * time.Millisecond, time.Duration(d.ProviderRecheckIntervalMS) * time.Millisecond
		})
	}()
	go func() { defer app.bg.Done(); stateQueue.Run(bgCtx) }()
	go func() { defer app.bg.Done(); keys.Run(bgCtx, 5*time.Second) }()
	go func() { app.served <- app.server.Serve(ln) }()
	log.Info("switchyard listening", "addr", "http://"+app.Addr, "version", version, "data_dir", cfg.DataDir)
	ok = true
	return app, nil
}

// Shutdown stops accepting, lets in-flight requests and streams finish within grace, stops the
// background work and closes the database.
func (a *App) Shutdown(grace time.Duration) error {
	a.draining.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := a.server.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		a.Log.Warn("grace period over; closing remaining connections")
		err = a.server.Close()
	}
	if serr := <-a.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	a.cancel()
	a.bg.Wait()
	return errors.Join(err, a.DB.Close())
}

// lockoutConfig is the model lockout setting in the engine's terms.
func lockoutConfig(s *settings.Snapshot) resilience.LockoutConfig {
	m := s.Resilience().ModelLockout
	return resilience.LockoutConfig{Enabled: m.Enabled, ErrorCodes: m.ErrorCodes,
		Base: time.Duration(m.BaseCooldownMS) * time.Millisecond, Max: time.Duration(m.MaxCooldownMS) * time.Millisecond,
		MaxSteps: m.MaxBackoffSteps, Exponential: m.UseExponentialBackoff, Families: m.Families}
}

// Package app is the composition root: configuration → database → services → web → serve →
// shutdown, as named builders, with the background runners started and stopped together.
// End-to-end tests start it exactly as production does.
package app

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/labstack/echo/v4"

	"switchyard/db"
	"switchyard/handlers"
	"switchyard/i18n"
	"switchyard/services/auth"
	"switchyard/services/catalog"
	"switchyard/services/clientkeys"
	"switchyard/services/cluster"
	"switchyard/services/errs"
	"switchyard/services/globalcap"
	"switchyard/services/health"
	"switchyard/services/metrics"
	"switchyard/services/oauth"
	"switchyard/services/ops"
	"switchyard/services/proxy"
	"switchyard/services/replicas"
	"switchyard/services/resilience"
	"switchyard/services/routing"
	"switchyard/services/secrets"
	"switchyard/services/sessions"
	"switchyard/services/settings"
	"switchyard/services/spend"
	"switchyard/services/statestore"
	"switchyard/services/traffic"
	"switchyard/services/webhooks"
	"switchyard/static"
	"switchyard/web"
)

// App is a running gateway.
type App struct {
	Addr   string // the address actually listened on
	DB     *db.DB
	Echo   *echo.Echo
	Routes []web.Route
	Log    *slog.Logger
	// Inventory is the model discovery, exposed for end-to-end tests.
	Inventory *proxy.Inventory
	// State is the resilience state store, exposed for end-to-end tests.
	State statestore.Store
	// Traffic is the request log and the traffic aggregates, exposed for end-to-end tests.
	Traffic *traffic.Service

	server   *http.Server
	draining atomic.Bool
	runners  runners
	served   chan error
	// accounts refreshes tokens in goroutines of its own, waited for before the database closes.
	accounts *oauth.Service
	// caps are the concurrency caps held in Redis; nil without --redis-url.
	caps *globalcap.Limiter
}

// Start opens the database, builds every service and starts serving on cfg.Addr.
func Start(ctx context.Context, cfg Config, lookupEnv func(string) (string, bool), log *slog.Logger) (*App, error) {
	errs.SetRenderer(englishText)
	st, err := openStorage(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			st.db.Close()
		}
	}()
	core, err := buildCore(ctx, cfg, st, lookupEnv, log)
	if err != nil {
		return nil, err
	}
	clock := clockOf(cfg)
	rep := newReplication(cfg, st, log)
	registry := buildReplicaRegistry(cfg, st, rep, clock, log)
	caps, err := openCaps(cfg, registry, rep, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if !ok && caps != nil {
			caps.Close()
		}
	}()
	res, err := buildResilience(ctx, clock, st, core, rep, registry, caps, log)
	if err != nil {
		return nil, err
	}
	accounts, err := buildAccounts(ctx, clock, st, core, res, rep, log)
	if err != nil {
		return nil, err
	}
	eng := buildEngine(clock, st, core, res, accounts, log)
	tr, err := buildTraffic(ctx, cfg, clock, st, core, accounts, log)
	if err != nil {
		return nil, err
	}

	hooks := webhooks.New(webhooks.Options{Clock: clock, Log: log, OnOutcome: res.metrics.WebhookDelivery,
		Secret: func() string { _, secret := core.prices.Webhook(); return secret }})
	var once func(spend.Crossing) bool
	if rep != nil {
		once = rep.onceAcrossReplicas(st.db)
	}
	limiter, err := buildLimiter(ctx, clock, tr, core.keys, core.prices, budgetAnnouncer(hooks, core.keys, core.prices, once), log)
	if err != nil {
		return nil, err
	}
	if caps != nil {
		limiter.UseSlots(globalcap.KeySlots{Limiter: caps}) // max_parallel exact across replicas
	}

	a := &App{DB: st.db, Log: log, Inventory: eng.inventory, State: res.store, Traffic: tr, served: make(chan error, 1), accounts: accounts,
		caps: caps}
	a.Echo, a.Routes, err = buildWeb(cfg, st, core, res, eng, accounts, tr, limiter, clock, &a.draining, rep.degraded, registry, log)
	if err != nil {
		return nil, err
	}

	a.runners.add("state store", res.store.Run)
	if rep != nil {
		rep.connect(core, res, accounts)
		a.runners.add("key use broadcast", rep.shareKeyUse(limiter, core.keys, registry.Live, func(ctx context.Context) (day, month map[int64]float64, err error) {
			return spendSince(ctx, limiter, tr, nil, false)
		}))
		a.runners.add("replica broadcast", rep.bus.Run)
		a.runners.add("replica heartbeat", registry.Run)
	}
	a.runners.add("lockout sweeper", func(ctx context.Context) { res.lockouts.RunSweeper(ctx, resilience.LockoutSweepInterval) })
	a.runners.add("session pin sweeper", func(ctx context.Context) { res.pins.RunSweeper(ctx, resilience.AffinitySweepInterval) })
	a.runners.add("stored response pin sweeper", func(ctx context.Context) { res.stored.RunSweeper(ctx, resilience.AffinitySweepInterval) })
	a.runners.add("replay memory sweeper", func(ctx context.Context) { res.replays.RunSweeper(ctx, resilience.AffinitySweepInterval) })
	a.runners.add("answer item sweeper", func(ctx context.Context) { res.items.RunSweeper(ctx, resilience.AffinitySweepInterval) })
	a.runners.add("claude session sweeper", func(ctx context.Context) { res.binds.RunSweeper(ctx, resilience.AffinitySweepInterval) })
	a.runners.add("model discovery", func(ctx context.Context) {
		eng.inventory.Run(ctx, func() (time.Duration, time.Duration) {
			d := core.settings.Snapshot().Resilience().Discovery
			return time.Duration(d.ModelRefreshIntervalMS) * time.Millisecond, time.Duration(d.ProviderRecheckIntervalMS) * time.Millisecond
		})
	})
	a.runners.add("client key last use", func(ctx context.Context) { core.keys.Run(ctx, 5*time.Second) })
	a.runners.add("request log", tr.Run)
	a.runners.add("budget webhooks", hooks.Run)
	a.runners.add("token refresher", accounts.RunRefresher)
	a.runners.add("usage poller", accounts.RunUsagePoller)

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	a.Addr = ln.Addr().String()
	guard := buildConnGuard(cfg, log)
	// The headers must arrive within the read timeout (the body's deadline is set per route by
	// the edge); an idle keep-alive connection is closed after two minutes, or after the
	// anonymous idle timeout while no request on it authenticated (the guard).
	a.server = &http.Server{Handler: a.Echo, ReadHeaderTimeout: readTimeout(cfg), IdleTimeout: 120 * time.Second,
		ConnState: guard.ConnState, ConnContext: guard.ConnContext, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	a.runners.start()
	if rep != nil {
		// The first resynchronisation (once LISTEN is in place) loads the store over memory: it
		// is done before any request is served, or it could undo what a request just changed.
		select {
		case <-rep.bus.Listening():
		case <-time.After(15 * time.Second):
			a.runners.stop()
			ln.Close()
			return nil, fmt.Errorf("cannot listen for the other replicas' changes: %v", rep.bus.Err())
		}
	}
	log.Info("switchyard listening", "addr", "http://"+a.Addr, "version", Version, "data_dir", cfg.DataDir)
	FlushLogger(log) // the start's lines are out before the first answer
	go func() { a.served <- a.server.Serve(guard.Listener(web.MalformedRequestListener(ln, log))) }()
	ok = true
	return a, nil
}

// englishText is the text of the services' messages in their logs and the diagnostics they keep
// (errs.SetRenderer): the English catalog. The dashboard renders messages in the reader's
// language from their keys (handlers.Text).
func englishText(key string, args ...any) string { return i18n.TL(i18n.EN, key, args...) }

// buildConnGuard raises the limit of open files to its maximum and sets the connection guard's
// budget by it (web.ConnBudget), with the per-client cap and the anonymous idle timeout.
func buildConnGuard(cfg Config, log *slog.Logger) *web.ConnGuard {
	limit, err := raiseFileLimit()
	if err != nil {
		log.Warn("cannot read the limit of open files; connections are not budgeted", "error", err)
	}
	maxOpen, reserve := web.ConnBudget(limit)
	log.Info("open files", "limit", limit, "max_connections", maxOpen, "reserve", reserve,
		"max_conns_per_client", cfg.MaxConnsPerClient, "anonymous_idle_timeout", anonymousIdleTimeout(cfg))
	return web.NewConnGuard(web.ConnLimits{PerClient: int(cfg.MaxConnsPerClient), Trusted: cfg.TrustedProxies,
		AnonymousIdle: anonymousIdleTimeout(cfg), MaxOpen: maxOpen}, log, time.Now)
}

// anonymousIdleTimeout is the configured anonymous idle timeout, or its default.
func anonymousIdleTimeout(cfg Config) time.Duration {
	if cfg.AnonymousIdleTimeout <= 0 {
		return DefaultAnonymousIdleTimeout
	}
	return cfg.AnonymousIdleTimeout
}

// readTimeout is the configured read timeout, or its default.
func readTimeout(cfg Config) time.Duration {
	if cfg.ReadTimeout <= 0 {
		return DefaultReadTimeout
	}
	return cfg.ReadTimeout
}

// clockOf is the clock every timer of the app runs on: the configured one or the real one.
func clockOf(cfg Config) clockwork.Clock {
	if cfg.Clock == nil {
		return clockwork.NewRealClock()
	}
	return cfg.Clock
}

// Version is the build's version, set by main from its -ldflags value.
var Version = "dev"

// Shutdown stops accepting, lets in-flight requests and streams finish within grace, stops the
// background work (which writes what is still pending) and closes the database.
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
	a.runners.stop()
	if a.caps != nil {
		a.caps.Close() // after the requests ended, so their slots went back first
	}
	a.accounts.Wait() // a refresh started by the last background work commits its token pair first
	return errors.Join(err, a.DB.Close())
}

// storage is the data directory: the database, the secret box and the keys derived from the
// instance secret.
type storage struct {
	db  *db.DB
	box *secrets.Box
	// sessionKey keys the session ids a Claude account sees of a client session bound to
	// another account.
	sessionKey []byte
	// cookieKey signs the dashboard's session cookies.
	cookieKey []byte
}

// openStorage creates the data directory, loads (or generates) the secret key and opens and
// migrates the database.
func openStorage(ctx context.Context, cfg Config, log *slog.Logger) (storage, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return storage{}, fmt.Errorf("data dir: %w", err)
	}
	key, created, err := secrets.LoadOrCreateKey(cfg.DataDir, cfg.SecretKey)
	if err != nil {
		return storage{}, err
	}
	if created {
		log.Info("generated a new secret key", "file", filepath.Join(cfg.DataDir, secrets.KeyFileName))
	}
	box, err := secrets.NewBox(key)
	if err != nil {
		return storage{}, err
	}
	target := filepath.Join(cfg.DataDir, "switchyard.db")
	if cfg.DatabaseURL != "" {
		target = cfg.DatabaseURL
	}
	d, err := db.Open(target)
	if err != nil {
		return storage{}, err
	}
	if n, err := d.Migrate(ctx); err != nil {
		d.Close()
		return storage{}, err
	} else if n > 0 {
		log.Info("applied migrations", "count", n, "store", d.Dialect)
	}
	if err := checkSecretKey(ctx, d, box); err != nil {
		d.Close()
		return storage{}, err
	}
	return storage{db: d, box: box, sessionKey: secrets.Derive(key, "claude session ids v1", 32),
		cookieKey: secrets.Derive(key, "dashboard session cookies v1", 32)}, nil
}

// keyCheckName is the key_value row that holds a value sealed with the secret key, written by
// the first start: a later start (or another replica) whose key does not open it would seal new
// credentials the others cannot read and fail on every stored one, so it refuses to start.
const keyCheckName = "secrets.key_check"

var keyCheckAAD = []byte("secret key check v1")

func checkSecretKey(ctx context.Context, d *db.DB, box *secrets.Box) error {
	kv := db.KV{DB: d}
	stored, ok, err := kv.GetValue(ctx, keyCheckName)
	if err != nil {
		return err
	}
	if !ok {
		return kv.PutValue(ctx, keyCheckName, base64.StdEncoding.EncodeToString(box.Seal([]byte("switchyard"), keyCheckAAD)))
	}
	sealed, err := base64.StdEncoding.DecodeString(stored)
	if err == nil {
		_, err = box.Open(sealed, keyCheckAAD)
	}
	if err != nil {
		return fmt.Errorf("the secret key does not open the credentials stored in %s: start with the key they were sealed with (SWITCHYARD_SECRET_KEY, or %s in the data dir); every replica sharing a database needs the same key", d.Path, secrets.KeyFileName)
	}
	return nil
}

// core are the services every other part builds on.
type core struct {
	auth     *auth.Service
	catalog  *catalog.Service
	keys     *clientkeys.Service
	settings *settings.Service
	sessions *sessions.Service
	// oauthSettings are the OAuth client settings (GET/PATCH /api/settings/oauth).
	oauthSettings *settings.OAuthService
	// combos are the combos (virtual models) and their registry.
	combos *routing.Service
	// prices are the price table, the budget time zone and webhook (GET/PATCH /api/settings/prices).
	prices *spend.PriceService
}

func buildCore(ctx context.Context, cfg Config, st storage, lookupEnv func(string) (string, bool), log *slog.Logger) (core, error) {
	kv := db.KV{DB: st.db}
	authSvc, generated, err := auth.Init(ctx, kv, cfg.AdminPassword, cfg.AdminToken, clockOf(cfg).Now)
	if err != nil {
		return core{}, err
	}
	if generated != "" {
		log.Warn("generated the admin password; it is shown only this once — log in and keep it safe, or set SWITCHYARD_ADMIN_PASSWORD",
			"password", generated)
	}
	cat, err := catalog.New(ctx, st.db, st.box, log)
	if err != nil {
		return core{}, err
	}
	combos, err := routing.New(ctx, st.db, log)
	if err != nil {
		return core{}, err
	}
	// A saved combo never names a provider or connection that is gone: the catalog asks the
	// combos before a name stops (or starts) existing, in the same transaction.
	cat.OnChanging(func(ctx context.Context, q db.Querier, ch catalog.Change) error {
		return combos.GuardCatalog(ctx, q, ch.GoneProvider, ch.GoneConnection, ch.NewProvider)
	})
	keys, err := clientkeys.New(ctx, st.db, log, time.Now, func(id int64) bool { _, ok := cat.Registry().Connection(id); return ok })
	if err != nil {
		return core{}, err
	}
	setSvc, err := settings.New(ctx, kv, lookupEnv, time.Now)
	if err != nil {
		return core{}, err
	}
	for _, w := range setSvc.Warnings() {
		log.Warn(w)
	}
	oauthSettings, err := settings.NewOAuth(ctx, kv, lookupEnv, time.Now)
	if err != nil {
		return core{}, err
	}
	for _, w := range oauthSettings.Warnings() {
		log.Warn(w)
	}
	sess, warnings, err := sessions.New(ctx, st.db, kv, clockOf(cfg).Now)
	if err != nil {
		return core{}, err
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	prices, warnings, err := spend.NewPriceService(ctx, kv, st.box)
	if err != nil {
		return core{}, err
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	return core{auth: authSvc, catalog: cat, keys: keys, settings: setSvc, sessions: sess, oauthSettings: oauthSettings,
		combos: combos, prices: prices}, nil
}

// resilienceState are the in-memory state tables, loaded from the state store and written
// back to it behind the request path.
type resilienceState struct {
	store      *statestore.SQLite
	cooldowns  *resilience.Cooldowns
	breakers   *resilience.Breakers
	gate       *resilience.ProviderGate
	lockouts   *resilience.Lockouts
	queues     *resilience.Queues
	semaphores *resilience.Semaphores
	health     *health.Tracker
	metrics    *metrics.Metrics
	// lanes and usage are the Claude usage-wall tables.
	lanes *resilience.Lanes
	usage *resilience.Usage
	// rests are the combo target rests (combo_routing: cool).
	rests *resilience.TargetCooldowns
	// leases are the exclusive session leases.
	leases *routing.Leases
	// pins are the session affinity pins; binds the Claude Code sessions' accounts.
	pins  *resilience.Pins
	binds *resilience.SessionBinds
	// stored says which connection holds a stored Responses answer, replays what reasoning a
	// connection could not read (both persisted and shared).
	stored  *resilience.StoredPins
	replays *resilience.ReplayMemory
	// items are the output items of translated Responses answers (memory only: they hold
	// conversation text).
	items *resilience.AnswerItems
}

func buildResilience(ctx context.Context, clock clockwork.Clock, st storage, c core, rep *replication, registry *replicas.Registry,
	caps *globalcap.Limiter, log *slog.Logger) (*resilienceState, error) {
	sqlStore := statestore.NewSQLite(st.db, log)
	saved, err := statestore.LoadResilience(ctx, sqlStore)
	if err != nil {
		return nil, err
	}
	store := sqlStore
	if rep != nil {
		store.OnWritten(rep.publish)
	}
	r := &resilienceState{store: sqlStore, gate: resilience.NewProviderGate(clock), health: health.New(clock),
		metrics: buildMetrics(st, registry)}
	r.cooldowns = resilience.NewCooldowns(clock, func(s resilience.ConnState) { store.Put(statestore.ConnRecord(s)) })
	r.cooldowns.Load(saved.Connections)
	r.breakers = resilience.NewBreakers(clock, func(s resilience.BreakerState) { store.Put(statestore.BreakerRecord(s)) })
	r.breakers.Load(saved.Breakers)
	r.breakers.OnTransition(func(provider, model string, from, to resilience.CircuitState) {
		if to == resilience.CircuitNone {
			return
		}
		log.Info("circuit breaker", "provider", provider, "model", model, "from", string(from), "to", string(to))
		r.metrics.BreakerTransition(provider, string(to))
	})
	r.breakers.OnTransition(func(provider, _ string, from, to resilience.CircuitState) {
		if from == resilience.CircuitHalfOpen && to == resilience.CircuitClosed {
			r.health.Reset(provider) // the provider proved itself; old failures no longer describe it
		}
	})
	r.lockouts = resilience.NewLockouts(clock, lockoutConfig(c.settings.Snapshot()), func(k resilience.LockoutKey, l *resilience.Lockout) {
		store.Put(statestore.LockoutRecord(k, l))
	})
	r.lockouts.Load(saved.Lockouts)
	c.settings.OnChange(func(s *settings.Snapshot) { r.lockouts.SetConfig(lockoutConfig(s)) })
	r.queues = resilience.NewQueues(clock, func(connID int64, waited time.Duration, outcome string) {
		if conn, ok := c.catalog.Registry().Connection(connID); ok {
			r.metrics.QueueWait(conn.Provider, conn.Label, outcome, waited)
		}
	})
	semOpt := resilience.SemaphoreOptions{Live: registry.Live}
	if caps != nil {
		semOpt.Shared = caps // only when set: a nil *Limiter in the interface would not be nil
	}
	r.semaphores = resilience.NewSemaphoresWith(clock, semOpt)
	r.lanes = resilience.NewLanes(clock, func(s resilience.LaneState) { store.Put(statestore.LaneRecord(s)) })
	r.lanes.Load(saved.Lanes)
	r.usage = resilience.NewUsage(clock, func(u resilience.AccountUsage) { store.Put(statestore.UsageRecord(u)) })
	r.usage.Load(saved.Usage)
	r.rests = resilience.NewTargetCooldowns(clock, func(t resilience.TargetCooldown) { store.Put(statestore.TargetRestRecord(t)) })
	r.rests.Load(saved.Rests)
	if r.leases, err = buildLeases(ctx, clock, st, c, r.cooldowns, log); err != nil {
		return nil, err
	}
	r.pins = resilience.NewPins(clock, resilience.MaxPins, func(k resilience.PinKey, p *resilience.Pin) { store.Put(statestore.PinRecord(k, p)) })
	r.pins.SetTTL(affinityTTL(c.settings.Snapshot()))
	r.pins.Load(saved.Pins)
	r.stored = resilience.NewStoredPins(clock, resilience.MaxStoredPins,
		func(k resilience.StoredKey, p *resilience.StoredPin) { store.Put(statestore.StoredPinRecord(k, p)) })
	r.stored.Load(saved.StoredPins)
	r.replays = resilience.NewReplayMemory(clock, resilience.MaxReplayMemory,
		func(k resilience.ReplayKey, s *resilience.ReplaySeal) { store.Put(statestore.ReplaySealRecord(k, s)) })
	r.replays.Load(saved.ReplaySeals)
	r.items = resilience.NewAnswerItems(clock, resilience.AnswerItemTTL, resilience.MaxAnswerItems, resilience.MaxAnswerItemBytes)
	c.settings.OnChange(func(s *settings.Snapshot) { r.pins.SetTTL(affinityTTL(s)) })
	r.binds = resilience.NewSessionBinds(clock, resilience.SessionBindTTL, resilience.MaxSessionBinds,
		func(s resilience.Session, b *resilience.SessionBind) { store.Put(statestore.SessionBindRecord(s, b)) })
	r.binds.Load(saved.SessionBinds)
	c.catalog.OnNewCredentials(func(ctx context.Context, id int64) error {
		r.cooldowns.Clear(id, true)
		r.replays.ForgetConnection(id) // another account may read what this one could not
		// The answer tells the operator the connection is usable again: commit that first.
		if err := store.Sync(ctx); err != nil {
			return fmt.Errorf("commit the cleared state of connection %d: %w", id, err)
		}
		return nil
	})
	c.catalog.OnConnectionDeleted(func(id int64) {
		r.cooldowns.Forget(id)
		r.lockouts.ForgetConnection(id)
		r.queues.Forget(id)
		r.semaphores.Forget(id)
		r.lanes.Forget(id)
		r.usage.Forget(id)
		r.rests.ForgetConnection(id)
		r.leases.ForgetConnection(id)
		r.pins.ForgetConnection(id)
		r.replays.ForgetConnection(id)
	})
	return r, nil
}

// buildLeases loads the exclusive session leases. A lease is granted on a usable connection the
// key may lease, healthy ones first; a key that is revoked or loses a connection or the scope
// loses its leases at once.
func buildLeases(ctx context.Context, clock clockwork.Clock, st storage, c core, cooldowns *resilience.Cooldowns,
	log *slog.Logger) (*routing.Leases, error) {
	conns := func(id int64) (routing.LeaseConnection, bool) {
		reg := c.catalog.Registry()
		conn, ok := reg.Connection(id)
		if !ok {
			return routing.LeaseConnection{}, false
		}
		usable := false
		if p, found := reg.Provider(conn.Provider); found {
			for _, x := range p.Conns {
				usable = usable || x.ID == id
			}
		}
		healthy, _ := cooldowns.Peek(id)
		return routing.LeaseConnection{ID: id, Name: conn.Label, Provider: conn.Provider, Usable: usable, Healthy: healthy,
			Priority: conn.Priority}, true
	}
	leases, err := routing.NewLeases(ctx, st.db, conns, clock.Now, log)
	if err != nil {
		return nil, err
	}
	c.keys.OnChange(func(ctx context.Context, keyID int64, a *clientkeys.Access, active bool) {
		leases.KeyChanged(ctx, keyID, active, a.MayLease(), a.LeaseConnections())
	})
	return leases, nil
}

// affinityTTL is the session affinity setting in the engine's terms; 0 = off.
func affinityTTL(s *settings.Snapshot) time.Duration {
	return time.Duration(s.Resilience().SessionAffinityTTLMS) * time.Millisecond
}

// buildAccounts is the Claude account service: sign-in, token refresh, usage polls and limit
// resets. It follows the catalog: new accounts and new credentials are taken at every change.
func buildAccounts(ctx context.Context, clock clockwork.Clock, st storage, c core, r *resilienceState, rep *replication,
	log *slog.Logger) (*oauth.Service, error) {
	opt := oauth.Options{Catalog: c.catalog, Settings: c.oauthSettings,
		Client: proxy.NewClient(), Clock: clock, Log: log, Store: r.store, Expire: r.cooldowns, Usage: r.usage}
	if rep != nil {
		opt.Leases = &cluster.Leases{DB: st.db, Owner: rep.id}
		opt.Shared = sealedValues{kv: db.KV{DB: st.db}, box: st.box}
	}
	svc, err := oauth.New(ctx, opt)
	if err != nil {
		return nil, err
	}
	c.catalog.OnChange(svc.Sync)
	return svc, nil
}

// lockoutConfig is the model lockout setting in the engine's terms.
func lockoutConfig(s *settings.Snapshot) resilience.LockoutConfig {
	m := s.Resilience().ModelLockout
	return resilience.LockoutConfig{Enabled: m.Enabled, ErrorCodes: m.ErrorCodes,
		Base: time.Duration(m.BaseCooldownMS) * time.Millisecond, Max: time.Duration(m.MaxCooldownMS) * time.Millisecond,
		MaxSteps: m.MaxBackoffSteps, Exponential: m.UseExponentialBackoff, Families: m.Families}
}

// engine is the proxy engine and its model discovery.
type engine struct {
	engine    *proxy.Engine
	inventory *proxy.Inventory
}

func buildEngine(clock clockwork.Clock, st storage, c core, r *resilienceState, accounts *oauth.Service, log *slog.Logger) engine {
	client := proxy.NewClient() // redirects are never followed
	inv := proxy.NewInventory(client, c.catalog.Registry, log, clock)
	inv.Tokens, inv.Copilot, inv.OAuthSettings = accounts, accounts, c.oauthSettings
	c.catalog.OnChange(func(*catalog.Registry) { inv.Kick() })
	e := proxy.New(proxy.Options{Catalog: c.catalog, Inventory: inv, Client: client, Log: log,
		Settings: c.settings, Cooldowns: r.cooldowns, Breakers: r.breakers, Gate: r.gate, Health: r.health, Lockouts: r.lockouts,
		Queues: r.queues, Semaphores: r.semaphores, Clock: clock, Observer: r.metrics,
		Accounts: accounts, Copilot: accounts, Lanes: r.lanes, Usage: r.usage, OAuthSettings: c.oauthSettings, SessionKey: st.sessionKey,
		Leases: r.leases, SessionBinds: r.binds, Pins: r.pins, StoredPins: r.stored, Replays: r.replays, AnswerItems: r.items, Combos: c.combos, TargetCooldowns: r.rests,
		Price: func(provider, providerType, model string) (spend.Price, bool) {
			p, _, ok := c.prices.Lookup(provider, providerType, model)
			return p, ok
		}})
	e.RegisterGauges(r.metrics)
	return engine{engine: e, inventory: inv}
}

// buildTraffic is the request log and the per-minute traffic aggregates behind the charts. What
// it stores is scrubbed of every connection's credential, the Claude accounts' live tokens and
// anything key-shaped.
func buildTraffic(ctx context.Context, cfg Config, clock clockwork.Clock, st storage, c core, accounts *oauth.Service,
	log *slog.Logger) (*traffic.Service, error) {
	return traffic.New(ctx, traffic.Options{DB: st.db, Clock: clock, Log: log,
		Redact:    func(s string) string { return ops.Redact(c.catalog.Registry(), s, accounts.AllSecrets()...) },
		Retention: time.Duration(cfg.RequestLogDays) * 24 * time.Hour, MaxRows: cfg.RequestLogRows,
		BodyBytes: int(cfg.RequestLogBodyKiB) << 10, SharedIDs: st.db.Dialect == db.Postgres})
}

func buildWeb(cfg Config, st storage, c core, r *resilienceState, e engine, accounts *oauth.Service, tr *traffic.Service,
	limiter *spend.Limiter, clock clockwork.Clock, draining *atomic.Bool, degraded func() []string,
	registry *replicas.Registry, log *slog.Logger) (*echo.Echo, []web.Route, error) {
	opsSvc := &ops.Service{Catalog: c.catalog, Discovery: e.inventory, Cooldowns: r.cooldowns, Breakers: r.breakers,
		Lockouts: r.lockouts, Queues: r.queues, Semaphores: r.semaphores, Health: r.health, Store: r.store,
		Accounts: accounts, Lanes: r.lanes, Usage: r.usage, OAuthSettings: c.oauthSettings, Pins: r.pins, Routing: e.engine}
	sessions := web.NewSessions(c.sessions, st.cookieKey, log)
	settingsH := &handlers.Settings{Svc: c.settings, OAuth: c.oauthSettings, Providers: c.catalog, Sessions: c.sessions,
		StreamEnds: r.metrics.StreamEndCounts, Prices: c.prices}
	return web.New(web.Deps{
		Log: log, Auth: c.auth, Keys: c.keys, Sessions: sessions, Static: static.FS, Metrics: r.metrics,
		Traffic: tr, Now: clock.Now, Limits: limiter, Degraded: degraded,
		Replicas: &handlers.Replicas{Registry: registry},
		Requests: &handlers.Requests{Log: tr, Keys: c.keys, Catalog: c.catalog, Sessions: sessions, Clock: clock.Now},
		Health: &handlers.Health{DB: st.db, Draining: draining, Version: Version, Shared: st.db.Dialect == db.Postgres,
			Degraded: degraded},
		API: &handlers.API{Catalog: c.catalog, Tester: e.engine, Ops: opsSvc,
			ValidateProviderOverrides:   settings.CheckProviderOverrides,
			ValidateConnectionOverrides: settings.CheckConnectionOverrides},
		KeysAPI:  &handlers.Keys{Keys: c.keys},
		KeyUsage: &handlers.KeyUsageAPI{Keys: c.keys, Limits: limiter},
		Settings: settingsH,
		Proxy: &handlers.Proxy{Engine: e.engine, Inventory: e.inventory, MaxBodyBytes: cfg.MaxBodyMiB << 20,
			Combos: c.combos.Registry},
		Leases: &handlers.Leases{Svc: r.leases},
		Dashboard: &handlers.Dashboard{Auth: c.auth, Sessions: sessions, Catalog: c.catalog, Keys: c.keys, Tester: e.engine,
			Inventory: e.inventory, Settings: settingsH, Ops: opsSvc, Traffic: tr, ValidateConnectionOverrides: settings.CheckConnectionOverrides,
			Claude: accounts, Accounts: accounts, Limits: limiter},
		CombosAPI: &handlers.CombosAPI{Combos: c.combos},
		CombosPage: &handlers.CombosPage{Combos: c.combos, Catalog: c.catalog, Inventory: e.inventory, Ops: opsSvc,
			Sessions: sessions},
		SessionsAPI: &handlers.SessionsAPI{Svc: c.sessions}, TrustedProxies: cfg.TrustedProxies, ReadTimeout: readTimeout(cfg),
		Hosts:  web.HostPolicy{Public: cfg.PublicHosts, Listen: cfg.Addr},
		Claude: &handlers.ClaudeAccounts{Svc: accounts}, SignIns: &handlers.AccountSignIns{Codex: accounts, Copilot: accounts},
	})
}

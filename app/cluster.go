package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
	"switchyard/services/catalog"
	"switchyard/services/clientkeys"
	"switchyard/services/cluster"
	"switchyard/services/globalcap"
	"switchyard/services/metrics"
	"switchyard/services/oauth"
	"switchyard/services/replicas"
	"switchyard/services/routing"
	"switchyard/services/secrets"
	"switchyard/services/sessions"
	"switchyard/services/settings"
	"switchyard/services/spend"
	"switchyard/services/statestore"
)

// replication ties this replica to the others that share its PostgreSQL store: what it changes
// (resilience records, configuration) is broadcast, and what they change is applied to its
// memory. It is nil on SQLite, where there is one replica.
type replication struct {
	id  string
	bus *cluster.Bus
	log *slog.Logger
	// caps are the concurrency caps in Redis (nil without it), watched for the degraded state.
	caps *globalcap.Limiter

	// mu guards what the services fill in once they exist; the bus runs (and calls handle and
	// resync) only after Start has built everything.
	mu     sync.Mutex
	tables statestore.Tables
	// store reloads the resilience records (resync).
	store statestore.Store
	// reload re-reads one part of the configuration, by its topic.
	reload map[string]func(context.Context) error
	// reloadOrder is the order a resync reloads the parts in: the catalog before what names it.
	reloadOrder []string
}

func newReplication(cfg Config, st storage, log *slog.Logger) *replication {
	if st.db.Dialect != db.Postgres {
		return nil
	}
	r := &replication{id: secrets.RandomToken(9), log: log, reload: map[string]func(context.Context) error{}}
	r.bus = cluster.New(cluster.Options{URL: cfg.DatabaseURL, Replica: r.id, Log: log, Handle: r.handle, Resync: r.resync})
	return r
}

// onTopic registers the reload of one part of the configuration.
func (r *replication) onTopic(topic string, reload func(context.Context) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reload[topic] = reload
	r.reloadOrder = append(r.reloadOrder, topic)
}

// changed tells the other replicas that a part of the configuration changed here.
func (r *replication) changed(topic string) { r.bus.PublishTopic(topic) }

// publish broadcasts a resilience record this replica changed, once it is committed.
func (r *replication) publish(rec statestore.Record) {
	id, err := statestore.EncodeID(rec)
	if err != nil {
		r.log.Warn("replica broadcast: a record without an identity", "kind", rec.Kind, "error", err)
		return
	}
	value := json.RawMessage("null")
	if rec.Value != nil {
		if value, err = json.Marshal(rec.Value); err != nil {
			r.log.Warn("replica broadcast: an unencodable record", "kind", rec.Kind, "error", err)
			return
		}
	}
	r.bus.Publish(cluster.Message{Topic: cluster.TopicState, Kind: string(rec.Kind), ID: id, Value: value})
}

// handle applies a change another replica made.
func (r *replication) handle(m cluster.Message) {
	r.mu.Lock()
	tables, reload := r.tables, r.reload[m.Topic]
	r.mu.Unlock()
	if m.Topic == cluster.TopicState {
		if err := tables.Apply(statestore.Kind(m.Kind), m.ID, m.Value); err != nil {
			r.log.Warn("replica broadcast: cannot apply a record", "kind", m.Kind, "from", m.From, "error", err)
		}
		return
	}
	if reload == nil {
		r.log.Warn("replica broadcast: a change of an unknown part", "topic", m.Topic, "from", m.From)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := reload(ctx); err != nil {
		r.log.Warn("replica broadcast: reload failed", "topic", m.Topic, "from", m.From, "error", err)
	}
}

// resync reloads everything from the store: after the listener (re)connected, what the others
// changed while it was not listening is known only there.
func (r *replication) resync(ctx context.Context) error {
	r.mu.Lock()
	order, reload, tables, store := r.reloadOrder, r.reload, r.tables, r.store
	r.mu.Unlock()
	for _, topic := range order {
		if err := reload[topic](ctx); err != nil {
			return err
		}
	}
	if store == nil {
		return nil
	}
	return tables.ApplyStored(ctx, store)
}

// configPart is one part of the configuration the replicas share: its services reload it, and
// tell when they committed a change of it.
type configPart interface {
	Reload(ctx context.Context) error
	OnCommitted(fn func(topic string))
}

// connect hands the replication what it applies changes to and what it broadcasts, once the
// services exist, and before the bus runs.
func (r *replication) connect(c core, res *resilienceState, accounts *oauth.Service) {
	parts := []struct {
		topic string
		part  configPart
	}{
		// The catalog first: the keys, combos and settings name what it holds.
		{catalog.Topic, c.catalog}, {clientkeys.Topic, c.keys}, {settings.Topic, c.settings},
		{settings.OAuthTopic, c.oauthSettings}, {routing.Topic, c.combos}, {spend.Topic, c.prices},
		{sessions.Topic, c.sessions},
	}
	for _, p := range parts {
		r.onTopic(p.topic, p.part.Reload)
		p.part.OnCommitted(r.changed)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.store = res.store
	r.tables = statestore.Tables{Cooldowns: res.cooldowns, Breakers: res.breakers, Lockouts: res.lockouts, Lanes: res.lanes,
		Usage: res.usage, Rests: res.rests, Pins: res.pins, Binds: res.binds, OAuth: accounts.ApplyRefreshRecord}
}

// degraded names what this replica runs without now: "store" while the broadcast's listener
// has lost the shared database (the store is then unreachable too), "redis" while the caps in
// Redis cannot be reached (each replica enforces its share meanwhile). Nil on SQLite.
func (r *replication) degraded() []string {
	if r == nil {
		return nil
	}
	var out []string
	if !r.bus.Healthy() && r.bus.Err() != nil { // not before the first connection was tried
		out = append(out, "store")
	}
	if r.caps != nil && !r.caps.Healthy() {
		out = append(out, "redis")
	}
	return out
}

// openCaps connects the concurrency caps to Redis when --redis-url is set (nil otherwise).
func openCaps(cfg Config, registry *replicas.Registry, rep *replication, log *slog.Logger) (*globalcap.Limiter, error) {
	if cfg.RedisURL == "" {
		return nil, nil
	}
	caps, err := globalcap.Open(cfg.RedisURL, globalcap.Options{Replica: registry.ID(), Log: log})
	if err != nil {
		return nil, fmt.Errorf("SWITCHYARD_REDIS_URL: %w", err)
	}
	rep.caps = caps
	return caps, nil
}

// buildReplicaRegistry is the list of replicas sharing the store, kept by heartbeats (run only
// on PostgreSQL: on SQLite there is one replica and nothing to beat for).
func buildReplicaRegistry(cfg Config, st storage, rep *replication, clock clockwork.Clock, log *slog.Logger) *replicas.Registry {
	host, err := os.Hostname()
	if err != nil {
		host = "?"
	}
	opt := replicas.Options{DB: st.db, Clock: clock, Log: log,
		Self: replicas.Self{Name: host + " " + cfg.Addr, Addr: cfg.Addr, Version: Version, CapMode: replicas.ModeSingle}}
	if rep != nil {
		opt.Self.CapMode = replicas.ModeShare
		if cfg.RedisURL != "" {
			opt.Self.CapMode = replicas.ModeRedis
		}
		opt.ID = rep.id // one id for the broadcast, the leases, the registry, the caps and the metrics
	}
	return replicas.New(opt)
}

// buildMetrics is the Prometheus registry; with a shared store it carries the replica's
// identity (switchyard_replica_info), so series scraped from each replica can be told apart.
func buildMetrics(st storage, registry *replicas.Registry) *metrics.Metrics {
	if st.db.Dialect != db.Postgres {
		return metrics.New()
	}
	return metrics.NewWith(metrics.Options{Replica: registry.ID(), ReplicaName: registry.Name()})
}

package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
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
	// data applies the messages of a topic that carry data rather than announce a change (key
	// use), by topic.
	data map[string]func(json.RawMessage) error
}

func newReplication(cfg Config, st storage, log *slog.Logger) *replication {
	if st.db.Dialect != db.Postgres {
		return nil
	}
	r := &replication{id: secrets.RandomToken(9), log: log, reload: map[string]func(context.Context) error{},
		data: map[string]func(json.RawMessage) error{}}
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
	tables, reload, data := r.tables, r.reload[m.Topic], r.data[m.Topic]
	r.mu.Unlock()
	if data != nil {
		if err := data(m.Value); err != nil {
			r.log.Warn("replica broadcast: cannot apply a message", "topic", m.Topic, "from", m.From, "error", err)
		}
		return
	}
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

// keyUseTopic carries what client keys did on a replica (spend.KeyDelta lists), so that their
// limits hold across the replicas; keyUseEvery is how often a replica tells, and keyUsePerMessage
// bounds a message below NOTIFY's payload limit.
const (
	keyUseTopic      = "keyuse"
	keyUseEvery      = 100 * time.Millisecond
	keyUsePerMessage = 80
)

// shareKeyUse makes each client key's limits (requests and tokens per minute, daily and monthly
// budgets) hold across the replicas: what keys do here is told to the others every keyUseEvery,
// and what they tell is counted here. After a resynchronisation (a listener that was away may
// have missed some), each key's spend of the day and month is raised to at least the stored
// one. A key's max_parallel is held to this replica's share of it, ceil(n ÷ live replicas). The
// returned loop publishes until ctx ends.
func (r *replication) shareKeyUse(l *spend.Limiter, keys *clientkeys.Service, live func() int,
	stored func(context.Context) (day, month map[int64]float64, err error)) func(context.Context) {
	l.Share(live)
	r.mu.Lock()
	r.data[keyUseTopic] = func(v json.RawMessage) error {
		var ds []spend.KeyDelta
		if err := json.Unmarshal(v, &ds); err != nil {
			return err
		}
		l.Absorb(ds, keys.LimitsOf)
		return nil
	}
	r.mu.Unlock()
	r.onTopic(keyUseTopic, func(ctx context.Context) error {
		day, month, err := stored(ctx)
		if err != nil {
			return err
		}
		l.Raise(day, month)
		return nil
	})
	return func(ctx context.Context) {
		t := time.NewTicker(keyUseEvery) // a cadence of the broadcast, not a policy: real time
		defer t.Stop()
		var seq uint64
		tell := func() {
			if !r.bus.Healthy() {
				return // kept in the limiter until the store is back: nothing queues up meanwhile
			}
			ds := l.TakeDeltas()
			for len(ds) > 0 {
				n := min(len(ds), keyUsePerMessage)
				v, err := json.Marshal(ds[:n])
				if err != nil {
					r.log.Warn("replica broadcast: key use not encodable", "error", err)
					return
				}
				seq++ // every message its own identity: the bus coalesces messages of one identity
				r.bus.Publish(cluster.Message{Topic: keyUseTopic, ID: json.RawMessage(strconv.FormatUint(seq, 10)), Value: v})
				ds = ds[n:]
			}
		}
		for {
			select {
			case <-ctx.Done():
				tell()
				return
			case <-t.C:
				tell()
			}
		}
	}
}

// onceAcrossReplicas reports whether this replica is the one to announce a budget crossing:
// the first to take the crossing's lease in the shared store, held until the budget's period
// ends. A store that cannot answer lets it announce: twice rather than never.
func (r *replication) onceAcrossReplicas(d *db.DB) func(spend.Crossing) bool {
	return func(c spend.Crossing) bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		name := fmt.Sprintf("budget:%d:%s:%d:%d", c.KeyID, c.Budget, c.Threshold, c.PeriodStart.Unix())
		now := time.Now()
		until := c.ResetsAt
		if until.Before(now.Add(time.Minute)) {
			until = now.Add(time.Minute)
		}
		ok, err := db.TryLease(ctx, d.W, name, r.id, now.UnixMilli(), until.UnixMilli())
		if err != nil {
			r.log.Warn("budget crossing: cannot tell whether another replica announced it; announcing", "key", c.KeyID, "error", err)
			return true
		}
		return ok
	}
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
		{sessions.Topic, c.sessions}, {routing.LeaseTopic, res.leases},
	}
	for _, p := range parts {
		r.onTopic(p.topic, p.part.Reload)
		p.part.OnCommitted(r.changed)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.store = res.store
	r.tables = statestore.Tables{Cooldowns: res.cooldowns, Breakers: res.breakers, Lockouts: res.lockouts, Lanes: res.lanes,
		Usage: res.usage, Rests: res.rests, Pins: res.pins, Stored: res.stored, Replays: res.replays, Binds: res.binds, OAuth: accounts.ApplyRefreshRecord}
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
	caps, err := globalcap.Open(cfg.RedisURL, globalcap.Options{Replica: registry.ID(), LeaseTTL: cfg.CapLeaseTTL, Log: log})
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

// sealedValues are named values in the key_value table, sealed with the secret key (the name is
// the additional data, so a value cannot be moved to another name): what replicas hand each
// other that must not lie in the database in clear, such as an exchanged Copilot token.
type sealedValues struct {
	kv  db.KV
	box *secrets.Box
}

func (s sealedValues) GetValue(ctx context.Context, name string) (string, bool, error) {
	raw, ok, err := s.kv.GetValue(ctx, "sealed."+name)
	if err != nil || !ok {
		return "", false, err
	}
	sealed, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return "", false, err
	}
	plain, err := s.box.Open(sealed, []byte(name))
	if err != nil {
		return "", false, err
	}
	return string(plain), true, nil
}

func (s sealedValues) PutValue(ctx context.Context, name, value string) error {
	return s.kv.PutValue(ctx, "sealed."+name, base64.StdEncoding.EncodeToString(s.box.Seal([]byte(value), []byte(name))))
}

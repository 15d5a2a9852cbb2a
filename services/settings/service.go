package settings

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services/errs"
)

// StoreKey is the key_value key holding the operator's saved values.
const StoreKey = "settings.resilience"

// Store is the key/value persistence the service needs.
type Store interface {
	GetValue(ctx context.Context, key string) (value string, ok bool, err error)
	// SaveRevision stores value under key and appends a revision row; it runs in one transaction.
	SaveRevision(ctx context.Context, key, value string) (revision int64, err error)
}

// revisionStore is implemented by stores that can tell the latest saved revision, so the
// revision survives a restart.
type revisionStore interface {
	Revision(ctx context.Context, key string) (int64, error)
}

// Service owns the resilience settings: it validates and saves patches and publishes an
// immutable Snapshot after each save.
type Service struct {
	doc document[Snapshot]
}

// document is one saved settings document (resilience, oauth): the environment's values, the
// saved ones and the snapshot built from both, republished after each save.
type document[S any] struct {
	sc       *schema
	store    Store
	env      map[string]any // setting path → value from the environment; read-only after load
	warnings []string
	// snapshot builds the published snapshot of an effective document.
	snapshot func(doc any, sources map[string]string, rev int64) *S

	// topic names the document to the replicas sharing its store (Topic, OAuthTopic).
	topic string

	snap atomic.Pointer[S]

	mu        sync.Mutex     // serialises saves so concurrent ones never lose an update
	persisted map[string]any // setting path → saved value; guarded by mu
	rev       int64          // the store revision persisted came from; guarded by mu
	listeners []func(*S)
	committed []func(topic string) // guarded by mu
}

// load reads the environment and the saved values and publishes the first snapshot.
func (d *document[S]) load(ctx context.Context, lookupEnv func(string) (string, bool)) error {
	var doc any
	var sources map[string]string
	var err error
	d.env, d.persisted, d.warnings, doc, sources, d.rev, err = load(ctx, d.sc, d.store, lookupEnv)
	if err != nil {
		return err
	}
	d.snap.Store(d.snapshot(doc, sources, d.rev))
	return nil
}

// apply validates changes and saves all of them or nothing (see Service.Apply), then publishes
// the new snapshot, hands it to the listeners and, once the lock is released, announces the
// save.
func (d *document[S]) apply(ctx context.Context, ch *Changes) (*S, error) {
	snap, announce, err := d.save(ctx, ch)
	for _, fn := range announce {
		fn(d.topic)
	}
	return snap, err
}

// save is apply under the lock; it returns the OnCommitted functions to call when it saved.
func (d *document[S]) save(ctx context.Context, ch *Changes) (*S, []func(string), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// Another replica may have saved since this one last read the store: the changes apply
	// over what it saved, never over an older document that would undo it.
	if err := d.refresh(ctx); err != nil {
		return nil, nil, err
	}
	next, doc, sources, rev, changed, err := apply(ctx, d.sc, d.store, d.env, d.persisted, ch)
	if err != nil {
		return nil, nil, err
	}
	if !changed {
		return d.snap.Load(), nil, nil
	}
	d.persisted, d.rev = next, rev
	snap := d.snapshot(doc, sources, rev)
	d.snap.Store(snap)
	for _, fn := range d.listeners {
		fn(snap)
	}
	return snap, d.committed, nil
}

// reload adopts what the store holds (see Service.Reload).
func (d *document[S]) reload(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refresh(ctx)
}

// refresh reads the saved values and, when they differ from the ones this process holds,
// publishes the snapshot they make and hands it to the listeners. A new revision of the same
// values (a change undone meanwhile) is published without the listeners: nothing they read
// changed. The environment stays this process's own. d.mu is held.
func (d *document[S]) refresh(ctx context.Context) error {
	persisted, _, doc, sources, rev, err := loadStored(ctx, d.sc, d.store, d.env)
	if err != nil {
		return err
	}
	if _, ok := d.store.(revisionStore); !ok {
		rev = d.rev // the store cannot tell: only the values count
	}
	now, _ := marshalPersisted(persisted)
	held, _ := marshalPersisted(d.persisted)
	if now == held && rev == d.rev {
		return nil
	}
	d.persisted, d.rev = persisted, rev
	snap := d.snapshot(doc, sources, rev)
	d.snap.Store(snap)
	if now != held {
		for _, fn := range d.listeners {
			fn(snap)
		}
	}
	return nil
}

// onCommitted registers fn to hear, with the document's topic, of every save that committed.
func (d *document[S]) onCommitted(fn func(topic string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.committed = append(d.committed, fn)
}

// New reads the environment through lookupEnv (os.LookupEnv in production) and loads the
// saved document from store. An invalid environment value is an error; saved values that
// no longer exist or are invalid are skipped and reported by Warnings. A nil lookupEnv
// means an empty environment; a nil now means time.Now.
func New(ctx context.Context, store Store, lookupEnv func(string) (string, bool), now func() time.Time) (*Service, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	if now == nil {
		now = time.Now
	}
	s := &Service{doc: document[Snapshot]{sc: resilienceSchema, store: store, topic: Topic,
		snapshot: func(doc any, sources map[string]string, rev int64) *Snapshot {
			return newSnapshot(*doc.(*Resilience), sources, rev, now())
		}}}
	if err := s.doc.load(ctx, lookupEnv); err != nil {
		return nil, err
	}
	return s, nil
}

// load reads a document's environment and saved values and builds its effective values.
func load(ctx context.Context, sc *schema, store Store, lookupEnv func(string) (string, bool)) (env, persisted map[string]any,
	warnings []string, doc any, sources map[string]string, rev int64, err error) {
	if env, err = loadEnv(sc, lookupEnv); err != nil {
		return nil, nil, nil, nil, nil, 0, err
	}
	persisted, warnings, doc, sources, rev, err = loadStored(ctx, sc, store, env)
	if err != nil {
		return nil, nil, nil, nil, nil, 0, err
	}
	return env, persisted, warnings, doc, sources, rev, nil
}

// loadStored reads a document's saved values and builds its effective values over env.
func loadStored(ctx context.Context, sc *schema, store Store, env map[string]any) (persisted map[string]any,
	warnings []string, doc any, sources map[string]string, rev int64, err error) {
	persisted = map[string]any{}
	raw, ok, err := store.GetValue(ctx, sc.key)
	if err != nil {
		return nil, nil, nil, nil, 0, fmt.Errorf("settings: load %s: %w", sc.key, err)
	}
	if ok {
		warnings = loadPersisted(sc, env, persisted, []byte(raw))
	}
	if rs, ok := store.(revisionStore); ok {
		if rev, err = rs.Revision(ctx, sc.key); err != nil {
			return nil, nil, nil, nil, 0, fmt.Errorf("settings: load revision: %w", err)
		}
	}
	doc, sources = build(sc, env, persisted)
	return persisted, warnings, doc, sources, rev, nil
}

// loadPersisted keeps in persisted every saved setting that still exists and validates, alone
// and together, and returns what it had to ignore.
func loadPersisted(sc *schema, env, persisted map[string]any, raw []byte) (warnings []string) {
	fe := fieldErrors{}
	flat := map[string]json.RawMessage{}
	flatten(sc, raw, "", flat, fe)
	for p, v := range decodeValues(sc, flat, fe) {
		if v == nil {
			continue
		}
		own := fieldErrors{}
		if sc.byPath[p].check(p, v, own); len(own) > 0 {
			fe.merge(own)
			continue
		}
		persisted[p] = v
	}
	for dropped := true; dropped; {
		dropped = false
		doc, _ := build(sc, env, persisted)
		cross := fieldErrors{}
		for _, c := range sc.cross(doc, cross) {
			for _, p := range c.paths {
				if _, ok := persisted[p]; ok {
					delete(persisted, p)
					dropped = true
				}
			}
		}
		fe.merge(cross)
	}
	for _, k := range slices.Sorted(maps.Keys(fe)) {
		warnings = append(warnings, fmt.Sprintf("%s: saved value ignored: %s: %s", sc.key, k, fe[k]))
	}
	return warnings
}

// Warnings lists the saved values New had to ignore, for the caller to log.
func (s *Service) Warnings() []string { return slices.Clone(s.doc.warnings) }

// Snapshot returns the current settings; lock-free.
func (s *Service) Snapshot() *Snapshot { return s.doc.snap.Load() }

// Effective is the document served by GET /api/settings/resilience.
func (s *Service) Effective() Document { return s.Snapshot().Document() }

// OnChange registers fn to be called with each new snapshot after a successful save, and after
// a Reload (or a save) that found values another replica saved. It runs synchronously, in
// save order, while saves are serialised: fn must not call Patch or Reload.
func (s *Service) OnChange(fn func(*Snapshot)) {
	s.doc.mu.Lock()
	defer s.doc.mu.Unlock()
	s.doc.listeners = append(s.doc.listeners, fn)
}

// Topic names the resilience settings to the replicas that share their store: a committed save
// is announced under it (OnCommitted), and a replica that hears it calls Reload.
const Topic = "settings"

// OnCommitted registers fn to run after every save that committed (a patch that changes
// nothing saves nothing), with Topic. It runs once saves are no longer serialised, so fn may
// call back into the service; it should hand the topic on quickly. Registering never replaces
// an earlier fn.
func (s *Service) OnCommitted(fn func(topic string)) { s.doc.onCommitted(fn) }

// Reload re-reads the saved values (another replica saved them) and, when they differ from the
// ones in use, publishes the snapshot they make over this process's environment and calls the
// OnChange functions with it, as a save here would have. When nothing changed, nothing runs.
// Saves read the store first as well, so a save never undoes what another replica saved.
// Reload is safe beside requests (they read the published snapshot) and saves (it takes their
// lock). Values that no longer validate are skipped, as at the start.
func (s *Service) Reload(ctx context.Context) error { return s.doc.reload(ctx) }

// Patch applies a partial settings document (PATCH /api/settings/resilience): see Apply. A
// JSON null removes the saved value of a setting (or of every setting in a section), reverting
// it to the environment or default.
func (s *Service) Patch(ctx context.Context, raw []byte) (*Snapshot, error) {
	return s.Apply(ctx, parsePatch(resilienceSchema, raw))
}

// Apply validates changes and saves them. Problems met while reading them, unknown settings,
// out-of-range values and cross-field violations are all reported together in one
// *errs.Error (code Invalid, Fields keyed by dotted path), and then nothing is saved. Changes
// that leave every saved value as it is return the current snapshot without writing.
func (s *Service) Apply(ctx context.Context, ch *Changes) (*Snapshot, error) {
	return s.doc.apply(ctx, ch)
}

// apply validates changes against a document's saved values and, when they change something,
// saves the new values (next) and returns them with the effective document they make. Every
// problem is reported in one *errs.Error and then nothing is saved.
func apply(ctx context.Context, sc *schema, store Store, env, persisted map[string]any, ch *Changes) (next map[string]any,
	doc any, sources map[string]string, rev int64, changed bool, err error) {
	fe := fieldErrors{}
	fe.merge(ch.problems)
	next = maps.Clone(persisted)
	for _, p := range slices.Sorted(maps.Keys(ch.values)) {
		v := ch.values[p]
		st, ok := sc.byPath[p]
		switch {
		case !ok:
			fe.add(p, errs.M("err.unknown_setting"))
		case v == nil:
			delete(next, p)
		case !st.accepts(v):
			return nil, nil, nil, 0, false, errs.Internalf("settings: %s cannot hold a %T", p, v)
		default:
			own := fieldErrors{}
			if st.check(p, v, own); len(own) > 0 {
				fe.merge(own)
				continue
			}
			next[p] = v
		}
	}
	doc, sources = build(sc, env, next)
	sc.cross(doc, fe)
	if err := fe.err(); err != nil {
		return nil, nil, nil, 0, false, err
	}
	text, err := marshalPersisted(next)
	if err != nil {
		return nil, nil, nil, 0, false, fmt.Errorf("settings: encode: %w", err)
	}
	if old, _ := marshalPersisted(persisted); old == text {
		return nil, nil, nil, 0, false, nil
	}
	if rev, err = store.SaveRevision(ctx, sc.key, text); err != nil {
		return nil, nil, nil, 0, false, fmt.Errorf("settings: save %s: %w", sc.key, err)
	}
	return next, doc, sources, rev, true, nil
}

// loadEnv reads every setting's canonical variable, then its aliases; the first one set wins.
// Problems are keyed by the variable's name (cross-field ones by the setting's path).
func loadEnv(sc *schema, lookup func(string) (string, bool)) (map[string]any, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	vals := map[string]any{}
	setBy := map[string]string{} // setting path → variable name
	fe := fieldErrors{}
	for _, st := range sc.list {
		for _, name := range st.EnvNames() {
			text, ok := lookup(name)
			if !ok {
				continue
			}
			v, problem := st.parseEnv(text)
			if problem != nil {
				fe.add(name, *problem)
				break
			}
			own := fieldErrors{}
			if st.check(st.path, v, own); len(own) > 0 {
				k := slices.Sorted(maps.Keys(own))[0]
				if k == st.path {
					fe.add(name, own[k])
				} else {
					fe.add(name, errs.M("err.at_key", k, own[k]))
				}
				break
			}
			vals[st.path], setBy[st.path] = v, name
			break
		}
	}
	if len(fe) == 0 {
		doc, _ := build(sc, vals, nil)
		cross := fieldErrors{}
		for _, c := range sc.cross(doc, cross) {
			var names []string
			for _, p := range c.paths {
				if n, ok := setBy[p]; ok {
					names = append(names, n)
				}
			}
			fe.add(c.key, errs.M("err.set_by", cross[c.key], strings.Join(names, ", ")))
		}
	}
	if len(fe) > 0 {
		return nil, fmt.Errorf("settings: environment: %w", &errs.Error{Code: errs.Invalid, Msg: errs.M("err.settings_env"), Fields: fe})
	}
	return vals, nil
}

// build merges the layers over the defaults into a new document (a pointer) and records each
// setting's source.
func build(sc *schema, env, persisted map[string]any) (any, map[string]string) {
	r := sc.newDoc()
	sources := make(map[string]string, len(sc.list))
	for _, st := range sc.list {
		v, src := st.def, SourceDefault
		if ev, ok := env[st.path]; ok {
			v, src = ev, SourceEnv
		}
		if pv, ok := persisted[st.path]; ok {
			v, src = pv, SourcePersisted
		}
		st.set(r, cloneValue(v))
		sources[st.path] = src
	}
	return r, sources
}

// marshalPersisted renders saved values as a nested partial document (keys sorted).
func marshalPersisted(flat map[string]any) (string, error) {
	root := map[string]any{}
	for p, v := range flat {
		parts := strings.Split(p, ".")
		m := root
		for _, k := range parts[:len(parts)-1] {
			child, ok := m[k].(map[string]any)
			if !ok {
				child = map[string]any{}
				m[k] = child
			}
			m = child
		}
		m[parts[len(parts)-1]] = v
	}
	b, err := json.Marshal(root)
	return string(b), err
}

// Snapshot is an immutable view of the effective settings. Values returned from it share
// slices and maps with every other reader and must not be modified.
type Snapshot struct {
	values    Resilience
	sources   map[string]string
	revision  int64
	updatedAt time.Time
	retryOn   *StatusMatcher
	failureOn *StatusMatcher
}

func newSnapshot(values Resilience, sources map[string]string, revision int64, at time.Time) *Snapshot {
	retryOn, _ := NewStatusMatcher(values.Retry.RetryOnStatuses) // validated already
	failureOn, _ := NewStatusMatcher(values.CircuitBreaker.FailureOnStatuses)
	return &Snapshot{values: values, sources: sources, revision: revision, updatedAt: at, retryOn: retryOn, failureOn: failureOn}
}

// Resilience returns the effective settings (a copy; its slices and maps are shared and
// must not be modified).
func (s *Snapshot) Resilience() Resilience { return s.values }

// Revision is the store revision the values came from: this process's last save, or the
// store's latest when they were read from it (0 when the store does not number revisions).
func (s *Snapshot) Revision() int64 { return s.revision }

// UpdatedAt is when this snapshot was built.
func (s *Snapshot) UpdatedAt() time.Time { return s.updatedAt }

// Value is the effective value of the setting at path (shared with every reader: do not
// modify it), or nil for an unknown path.
func (s *Snapshot) Value(path string) any {
	if st, ok := byPath[path]; ok {
		return st.get(&s.values)
	}
	return nil
}

// Source names the layer a setting's value came from ("default", "env", "persisted"), or ""
// for an unknown path.
func (s *Snapshot) Source(path string) string { return s.sources[path] }

// Sources returns every setting path with its source.
func (s *Snapshot) Sources() map[string]string { return maps.Clone(s.sources) }

// RetryOn matches retry.retry_on_statuses.
func (s *Snapshot) RetryOn() *StatusMatcher { return s.retryOn }

// FailureOn matches circuit_breaker.failure_on_statuses.
func (s *Snapshot) FailureOn() *StatusMatcher { return s.failureOn }

// Document is the JSON view of GET /api/settings/resilience.
type Document struct {
	Values   Resilience        `json:"values"`
	Sources  map[string]string `json:"sources"`
	Revision int64             `json:"revision"`
}

// Document returns the snapshot as a Document.
func (s *Snapshot) Document() Document {
	return Document{Values: s.values, Sources: s.Sources(), Revision: s.revision}
}

package settings

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
	store    Store
	now      func() time.Time
	env      map[string]any // leaf path → value from the environment; read-only after New
	warnings []string

	snap atomic.Pointer[Snapshot]

	mu        sync.Mutex     // serialises Patch so concurrent saves never lose an update
	persisted map[string]any // leaf path → saved value; guarded by mu
	listeners []func(*Snapshot)
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
	env, err := loadEnv(lookupEnv)
	if err != nil {
		return nil, err
	}
	s := &Service{store: store, now: now, env: env, persisted: map[string]any{}}
	raw, ok, err := store.GetValue(ctx, StoreKey)
	if err != nil {
		return nil, fmt.Errorf("settings: load %s: %w", StoreKey, err)
	}
	if ok {
		s.loadPersisted([]byte(raw))
	}
	var rev int64
	if rs, ok := store.(revisionStore); ok {
		if rev, err = rs.Revision(ctx, StoreKey); err != nil {
			return nil, fmt.Errorf("settings: load revision: %w", err)
		}
	}
	values, sources := build(s.env, s.persisted)
	s.snap.Store(newSnapshot(values, sources, rev, now()))
	return s, nil
}

// loadPersisted keeps every saved leaf that still exists and validates, alone and together.
func (s *Service) loadPersisted(raw []byte) {
	errs := fieldErrors{}
	flat := map[string]json.RawMessage{}
	flatten(raw, "", flat, errs)
	for p, v := range decodeLeaves(flat, errs) {
		if v != nil {
			s.persisted[p] = v
		}
	}
	for dropped := true; dropped; {
		dropped = false
		r, _ := build(s.env, s.persisted)
		cross := fieldErrors{}
		for _, c := range checkCross(&r, cross) {
			for _, p := range c.paths {
				if _, ok := s.persisted[p]; ok {
					delete(s.persisted, p)
					dropped = true
				}
			}
		}
		for k, msg := range cross {
			errs.add(k, msg)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		s.warnings = append(s.warnings, fmt.Sprintf("%s: saved value ignored: %s: %s", StoreKey, k, errs[k]))
	}
}

// Warnings lists the saved values New had to ignore, for the caller to log.
func (s *Service) Warnings() []string { return slices.Clone(s.warnings) }

// Snapshot returns the current settings; lock-free.
func (s *Service) Snapshot() *Snapshot { return s.snap.Load() }

// Effective is the document served by GET /api/settings/resilience.
func (s *Service) Effective() Document { return s.Snapshot().Document() }

// OnChange registers fn to be called with each new snapshot after a successful save. It
// runs synchronously, in save order, while saves are serialised: fn must not call Patch.
func (s *Service) OnChange(fn func(*Snapshot)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = append(s.listeners, fn)
}

// Patch applies a partial settings document. Unknown keys, wrong types, out-of-range
// values and cross-field violations are all reported together in a *ValidationError, and
// then nothing is saved. A JSON null removes the saved value of a leaf (or of every leaf
// in a section), reverting it to the environment or default. A patch that changes no
// saved value returns the current snapshot without writing.
func (s *Service) Patch(ctx context.Context, raw []byte) (*Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	errs := fieldErrors{}
	flat := map[string]json.RawMessage{}
	flatten(raw, "", flat, errs)
	changes := decodeLeaves(flat, errs)
	next := maps.Clone(s.persisted)
	for p, v := range changes {
		if v == nil {
			delete(next, p)
		} else {
			next[p] = v
		}
	}
	values, sources := build(s.env, next)
	checkCross(&values, errs)
	if len(errs) > 0 {
		return nil, &ValidationError{Fields: errs}
	}

	doc, err := marshalPersisted(next)
	if err != nil {
		return nil, fmt.Errorf("settings: encode: %w", err)
	}
	if old, _ := marshalPersisted(s.persisted); old == doc {
		return s.snap.Load(), nil
	}
	rev, err := s.store.SaveRevision(ctx, StoreKey, doc)
	if err != nil {
		return nil, fmt.Errorf("settings: save %s: %w", StoreKey, err)
	}
	s.persisted = next
	snap := newSnapshot(values, sources, rev, s.now())
	s.snap.Store(snap)
	for _, fn := range s.listeners {
		fn(snap)
	}
	return snap, nil
}

// loadEnv reads every leaf's canonical variable, then its aliases; the first one set wins.
func loadEnv(lookup func(string) (string, bool)) (map[string]any, error) {
	vals := map[string]any{}
	setBy := map[string]string{} // leaf path → variable name
	errs := fieldErrors{}
	for _, l := range leaves {
		for _, name := range l.envNames() {
			text, ok := lookup(name)
			if !ok {
				continue
			}
			v, err := l.parse(text)
			if err != nil {
				errs.add(name, err.Error())
				break
			}
			le := fieldErrors{}
			l.check(l.path, v, le)
			if len(le) > 0 {
				errs.add(name, le.String())
				break
			}
			vals[l.path], setBy[l.path] = v, name
			break
		}
	}
	if len(errs) == 0 {
		r, _ := build(vals, nil)
		cross := fieldErrors{}
		for _, c := range checkCross(&r, cross) {
			var names []string
			for _, p := range c.paths {
				if n, ok := setBy[p]; ok {
					names = append(names, n)
				}
			}
			errs.add(c.key, fmt.Sprintf("%s (set by %s)", cross[c.key], strings.Join(names, ", ")))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("settings: environment: %w", &ValidationError{Fields: errs})
	}
	return vals, nil
}

// build merges the layers over the defaults and records each leaf's source.
func build(env, persisted map[string]any) (Resilience, map[string]string) {
	var r Resilience
	sources := make(map[string]string, len(leaves))
	for _, l := range leaves {
		v, src := l.def, SourceDefault
		if ev, ok := env[l.path]; ok {
			v, src = ev, SourceEnv
		}
		if pv, ok := persisted[l.path]; ok {
			v, src = pv, SourcePersisted
		}
		l.set(&r, cloneValue(v))
		sources[l.path] = src
	}
	return r, sources
}

// flatten walks a (partial) document into leaf path → raw JSON. A null section expands to
// a null for every leaf below it.
func flatten(raw []byte, prefix string, out map[string]json.RawMessage, errs fieldErrors) {
	obj, msg := decodeObject(raw)
	if msg != "" {
		if prefix == "" {
			msg = "the settings document " + msg
		}
		errs.add(prefix, msg)
		return
	}
	for k, v := range obj {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		switch {
		case strings.Contains(k, "."):
			errs.add(p, "is not a known setting")
		case leafByPath[p] != nil:
			out[p] = v
		case sections[p] && isNull(v):
			for _, l := range leaves {
				if strings.HasPrefix(l.path, p+".") {
					out[l.path] = v
				}
			}
		case sections[p]:
			flatten(v, p, out, errs)
		default:
			errs.add(p, "is not a known setting")
		}
	}
}

// decodeObject reads one JSON object, rejecting repeated keys and trailing data.
func decodeObject(raw []byte) (map[string]json.RawMessage, string) {
	const notObject = "must be a JSON object"
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, notObject
	}
	obj := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, notObject
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, notObject
		}
		if _, dup := obj[key]; dup {
			return nil, fmt.Sprintf("repeats the key %q", key)
		}
		obj[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, notObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notObject
	}
	return obj, ""
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// decodeLeaves decodes and validates each flattened value; a nil value marks a JSON null.
// Invalid leaves are reported in errs and left out.
func decodeLeaves(flat map[string]json.RawMessage, errs fieldErrors) map[string]any {
	out := make(map[string]any, len(flat))
	for p, raw := range flat {
		if isNull(raw) {
			out[p] = nil
			continue
		}
		l := leafByPath[p]
		v, err := l.decode(raw)
		if err != nil {
			errs.add(p, err.Error())
			continue
		}
		le := fieldErrors{}
		if l.check(p, v, le); len(le) > 0 {
			for k, msg := range le {
				errs.add(k, msg)
			}
			continue
		}
		out[p] = v
	}
	return out
}

// marshalPersisted renders saved leaves as a nested partial document (keys sorted).
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

// Revision is the store revision of the last save made by this process; 0 after a load.
func (s *Snapshot) Revision() int64 { return s.revision }

// UpdatedAt is when this snapshot was built.
func (s *Snapshot) UpdatedAt() time.Time { return s.updatedAt }

// Source names the layer a leaf's value came from ("default", "env", "persisted"), or ""
// for an unknown path.
func (s *Snapshot) Source(path string) string { return s.sources[path] }

// Sources returns every leaf path with its source.
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

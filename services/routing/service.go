package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"switchyard/db"
	"switchyard/services/errs"
)

// Service stores combos and keeps the registry the engine reads. Every write validates the
// combo against the providers, connections and combos in the same transaction that writes it,
// and the catalog asks GuardCatalog inside its own, so two concurrent saves can never leave a
// combo naming something that is gone.
type Service struct {
	db  *db.DB
	log *slog.Logger

	mu  sync.Mutex // serialises writes so registry swaps follow commits in order
	reg Published[Registry]
	// rows are what the current registry was built from, so Reload can tell what changed;
	// committed are the OnCommitted functions. Both guarded by mu.
	rows      []db.Combo
	committed []func(topic string)
}

// Topic names the combos to the replicas that share their database: a committed write is
// announced under it (OnCommitted), and a replica that hears it calls Reload.
const Topic = "combos"

// New loads the registry from the database.
func New(ctx context.Context, d *db.DB, log *slog.Logger) (*Service, error) {
	s := &Service{db: d, log: log}
	if err := s.rebuild(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Registry returns the current immutable snapshot of every combo.
func (s *Service) Registry() *Registry { return s.reg.Load() }

// OnChange registers fn to run after every registry swap (it is not called for the current
// one). Registering never replaces an earlier fn.
func (s *Service) OnChange(fn func(*Registry)) { s.reg.OnChange(fn) }

// OnCommitted registers fn to run after every committed create, change, move or deletion of a
// combo, with Topic. It runs once the write lock is released, so fn may call back into the
// service; it should hand the topic on quickly. Registering never replaces an earlier fn.
func (s *Service) OnCommitted(fn func(topic string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed = append(s.committed, fn)
}

// Reload re-reads every combo (another replica changed them) and, when they differ from the
// ones the registry was built from, swaps in a new registry and tells the OnChange functions,
// as a local write would have. When nothing changed, nothing is swapped and no one is told.
// Reload is safe beside requests (they read the published registry) and local writes (it takes
// their lock).
func (s *Service) Reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := db.ListCombos(ctx, s.db.W)
	if err != nil {
		return err
	}
	if slices.Equal(rows, s.rows) {
		return nil
	}
	s.swap(rows)
	return nil
}

// rebuild reads every combo and swaps in a new registry; s.mu is held (or the service is new).
func (s *Service) rebuild(ctx context.Context) error {
	rows, err := db.ListCombos(ctx, s.db.W)
	if err != nil {
		return err
	}
	s.swap(rows)
	return nil
}

// swap builds the registry of rows and publishes it; s.mu is held (or the service is new).
func (s *Service) swap(rows []db.Combo) {
	s.rows = rows
	list := make([]Combo, 0, len(rows))
	for _, r := range rows {
		c, err := fromRow(r)
		if err != nil {
			// Only a hand-edited database gets here; the combo is left out rather than served wrong.
			s.log.Error("combo unreadable; it is not served", "combo", r.Name, "error", err)
			continue
		}
		list = append(list, c)
	}
	s.reg.Store(NewRegistry(list))
}

func fromRow(r db.Combo) (Combo, error) {
	c := Combo{ID: r.ID, Name: r.Name, Strategy: Strategy(r.Strategy), MaxAttempts: r.MaxAttempts,
		TargetTimeoutMS: r.TargetTimeoutMS, WaitUntilReset: r.WaitUntilReset, WaitUntilResetMaxMS: r.WaitUntilResetMaxMS,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if err := json.Unmarshal([]byte(r.Targets), &c.Targets); err != nil {
		return c, fmt.Errorf("combo %d targets: %w", r.ID, err)
	}
	return c, nil
}

func toRow(c Combo) db.Combo {
	targets, _ := json.Marshal(c.Targets) // plain strings and ints: cannot fail
	return db.Combo{ID: c.ID, Name: c.Name, Strategy: string(c.Strategy), Targets: string(targets), MaxAttempts: c.MaxAttempts,
		TargetTimeoutMS: c.TargetTimeoutMS, WaitUntilReset: c.WaitUntilReset, WaitUntilResetMaxMS: c.WaitUntilResetMaxMS,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

// List returns every combo ordered by name.
func (s *Service) List(ctx context.Context) ([]Combo, error) { return readCombos(ctx, s.db.R) }

// Get returns one combo.
func (s *Service) Get(ctx context.Context, id int64) (Combo, error) { return s.load(ctx, s.db.R, id) }

// Create validates and stores a new combo. Absent fields take their defaults (NewCombo).
func (s *Service) Create(ctx context.Context, in Input) (Combo, error) {
	c := NewCombo()
	in.Apply(&c)
	return s.write(ctx, func(tx *db.Tx) (Combo, error) {
		if err := s.check(ctx, tx, &c, ""); err != nil {
			return c, err
		}
		r := toRow(c)
		if err := db.InsertCombo(ctx, tx, &r); err != nil {
			return c, dbErr(err)
		}
		c.ID, c.CreatedAt, c.UpdatedAt = r.ID, r.CreatedAt, r.UpdatedAt
		return c, nil
	})
}

// Update applies a partial update (targets, when given, replace the list).
func (s *Service) Update(ctx context.Context, id int64, in Input) (Combo, error) {
	return s.write(ctx, func(tx *db.Tx) (Combo, error) {
		c, err := s.load(ctx, tx, id)
		if err != nil {
			return c, err
		}
		old := c.Name
		in.Apply(&c)
		return c, s.save(ctx, tx, &c, old)
	})
}

// MoveTarget moves the target at index one place up (delta −1) or down (+1) and saves the
// combo. expect is the target's Key as the operator saw it there: when the combo changed
// meanwhile and another target stands there, nothing moves (a conflict).
func (s *Service) MoveTarget(ctx context.Context, id int64, index, delta int, expect string) (Combo, error) {
	return s.write(ctx, func(tx *db.Tx) (Combo, error) {
		c, err := s.load(ctx, tx, id)
		if err != nil {
			return c, err
		}
		to := index + delta
		if index < 0 || index >= len(c.Targets) || c.Targets[index].Key() != expect || (delta != -1 && delta != 1) {
			return c, errs.New(errs.Conflict, "err.combo_changed", c.Name)
		}
		if to < 0 || to >= len(c.Targets) {
			return c, nil // already first (or last): nothing to do
		}
		c.Targets[index], c.Targets[to] = c.Targets[to], c.Targets[index]
		return c, s.save(ctx, tx, &c, c.Name)
	})
}

// Delete removes a combo no other combo names.
func (s *Service) Delete(ctx context.Context, id int64) error {
	_, err := s.write(ctx, func(tx *db.Tx) (Combo, error) {
		c, err := s.load(ctx, tx, id)
		if err != nil {
			return c, err
		}
		users, err := comboUsers(ctx, tx, c.Name, c.ID)
		if err != nil {
			return c, err
		}
		if len(users) > 0 {
			return c, inUse("err.combo_in_use", c.Name, strings.Join(users, ", "))
		}
		return c, db.DeleteCombo(ctx, tx, id)
	})
	return err
}

// write runs fn in one transaction and swaps the registry once it committed; then, with the
// lock released, it announces the commit.
func (s *Service) write(ctx context.Context, fn func(tx *db.Tx) (Combo, error)) (Combo, error) {
	out, announce, err := s.commit(ctx, fn)
	for _, fn := range announce {
		fn(Topic)
	}
	return out, err
}

// commit is write under the lock; it returns the OnCommitted functions to call when the
// transaction committed, whether or not the registry could be rebuilt after it.
func (s *Service) commit(ctx context.Context, fn func(tx *db.Tx) (Combo, error)) (Combo, []func(string), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out Combo
	err := s.db.WithTx(ctx, func(tx *db.Tx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	if err != nil {
		return Combo{}, nil, err
	}
	return out, s.committed, s.rebuild(ctx)
}

// load reads one combo inside a transaction.
func (s *Service) load(ctx context.Context, q db.Querier, id int64) (Combo, error) {
	r, err := db.GetCombo(ctx, q, id)
	if errors.Is(err, db.ErrNotFound) {
		return Combo{}, errs.New(errs.NotFound, "err.combo_not_found", id)
	}
	if err != nil {
		return Combo{}, err
	}
	return fromRow(r)
}

// save validates an existing combo (named old before the change) and writes it.
func (s *Service) save(ctx context.Context, tx *db.Tx, c *Combo, old string) error {
	if err := s.check(ctx, tx, c, old); err != nil {
		return err
	}
	r := toRow(*c)
	if err := db.UpdateCombo(ctx, tx, &r); err != nil {
		return dbErr(err)
	}
	c.UpdatedAt = r.UpdatedAt
	return nil
}

// check validates c against what the transaction sees; old is its name before a rename ("" for
// a new combo), which other combos must not still name.
func (s *Service) check(ctx context.Context, q db.Querier, c *Combo, old string) error {
	l, err := lookup(ctx, q, c.ID)
	if err != nil {
		return err
	}
	f := Validate(c, l)
	_, taken := l.Combos[c.Name]
	if len(f) > 0 {
		if _, bad := f["name"]; taken && !bad {
			f["name"] = errs.M("err.combo_exists")
		}
		return errs.Fields(f)
	}
	if taken {
		return nameTaken()
	}
	if old != "" && old != c.Name {
		if users, err := comboUsers(ctx, q, old, c.ID); err != nil {
			return err
		} else if len(users) > 0 {
			return inUse("err.combo_rename_in_use", old, strings.Join(users, ", "))
		}
	}
	return nil
}

// lookup reads the providers, their connections and every combo but the one with id self.
func lookup(ctx context.Context, q db.Querier, self int64) (Lookup, error) {
	provs, err := db.ListProviders(ctx, q)
	if err != nil {
		return Lookup{}, err
	}
	conns, err := db.ListConnections(ctx, q)
	if err != nil {
		return Lookup{}, err
	}
	l := Lookup{Providers: make(map[string]map[string]bool, len(provs)), Combos: map[string]*Combo{}}
	byID := make(map[int64]string, len(provs))
	for _, p := range provs {
		l.Providers[p.Name], byID[p.ID] = map[string]bool{}, p.Name
	}
	for _, c := range conns {
		if p, ok := byID[c.ProviderID]; ok {
			l.Providers[p][c.Name] = true
		}
	}
	combos, err := readCombos(ctx, q)
	if err != nil {
		return Lookup{}, err
	}
	for i := range combos {
		if combos[i].ID != self {
			l.Combos[combos[i].Name] = &combos[i]
		}
	}
	return l, nil
}

func readCombos(ctx context.Context, q db.Querier) ([]Combo, error) {
	rows, err := db.ListCombos(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]Combo, 0, len(rows))
	for _, r := range rows {
		c, err := fromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// comboUsers names the combos (other than self) that list the combo name as a target.
func comboUsers(ctx context.Context, q db.Querier, name string, self int64) ([]string, error) {
	return users(ctx, q, func(c *Combo) bool { return c.ID != self && c.NamesCombo(name) })
}

func users(ctx context.Context, q db.Querier, match func(*Combo) bool) ([]string, error) {
	combos, err := readCombos(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []string
	for i := range combos {
		if match(&combos[i]) {
			out = append(out, combos[i].Name)
		}
	}
	return out, nil
}

// GuardCatalog is the catalog's check before it writes a change (inside the change's
// transaction, q): a provider (connection "") or a provider's connection whose name stops
// existing — deleted, renamed, or (a connection) moved to another provider — must not be named
// by a combo (409 naming the combos), and a provider name that starts existing must not be a
// combo's (422 on "name").
func (s *Service) GuardCatalog(ctx context.Context, q db.Querier, goneProvider, goneConnection, newProvider string) error {
	if newProvider != "" {
		taken, err := users(ctx, q, func(c *Combo) bool { return c.Name == newProvider })
		if err != nil {
			return err
		}
		if len(taken) > 0 {
			return errs.Field("name", "err.name_is_combo")
		}
	}
	if goneProvider == "" {
		return nil
	}
	list, err := users(ctx, q, func(c *Combo) bool { return c.NamesProvider(goneProvider, goneConnection) })
	if err != nil || len(list) == 0 {
		return err
	}
	if goneConnection != "" {
		return inUse("err.connection_in_combos", goneConnection, goneProvider, strings.Join(list, ", "))
	}
	return inUse("err.provider_in_combos", goneProvider, strings.Join(list, ", "))
}

// inUse is the 409 for something combos still name; its code is in_use.
func inUse(key string, args ...any) *errs.Error {
	e := errs.New(errs.Conflict, key, args...)
	e.Reason = "in_use"
	return e
}

// nameTaken is the 409 for a name another combo has.
func nameTaken() *errs.Error {
	e := errs.Field("name", "err.combo_exists")
	e.Code, e.Msg = errs.Conflict, errs.M("err.combo_exists")
	return e
}

func dbErr(err error) error {
	switch {
	case errors.Is(err, db.ErrConflict):
		return nameTaken()
	case errors.Is(err, db.ErrNotFound):
		return errs.Wrap(err, errs.NotFound, "err.not_found")
	}
	return err
}

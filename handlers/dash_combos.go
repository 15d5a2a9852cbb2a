package handlers

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/ops"
	"switchyard/services/proxy"
	"switchyard/services/routing"
	"switchyard/views"
)

// CombosPage serves the dashboard's Combos pages: the list with each target's live state, the
// in-place reordering of targets, and the form that creates and edits a combo.
type CombosPage struct {
	Combos    *routing.Service
	Catalog   *catalog.Service
	Inventory *proxy.Inventory
	Ops       *ops.Service
	Sessions  Sessions
}

// comboFields are the form's fields besides the targets, for placing service errors.
var comboFields = []string{"name", "strategy", "targets", "max_attempts", "target_timeout_ms", "wait_until_reset_max_ms"}

// newTargetRows is how many empty target rows a new combo's form starts with: a combo is for
// failing over, so two.
const newTargetRows = 2

func (p *CombosPage) shell(c echo.Context, title, path string) views.Shell {
	return pageShell(c, p.Sessions, "combos", title, path)
}

func (p *CombosPage) flash(c echo.Context, kind, text string) { _ = p.Sessions.AddFlash(c, kind, text) }

// Page answers GET /combos.
func (p *CombosPage) Page(c echo.Context) error {
	cards, version := p.cards(c)
	return Render(c, http.StatusOK, views.CombosPage(views.CombosModel{
		Shell: p.shell(c, i18n.T(ctx(c), "combos.title"), "/combos"), Combos: cards, Version: version}))
}

// State answers GET /combos/state, the page's poll: every target's live state out of band, or
// 204 while it is still the version the page sent (?v=).
func (p *CombosPage) State(c echo.Context) error {
	cards, version := p.cards(c)
	return renderPoll(c, version, views.CombosLiveState(cards, version))
}

// cards builds every combo's card from memory (the combo registry and the live state tables,
// no database read, so the page can poll it) and the version of the live state.
func (p *CombosPage) cards(c echo.Context) ([]views.ComboCard, string) {
	reg := p.Combos.Registry()
	now := p.Ops.Now()
	states := map[routing.Target]ops.TargetState{}
	state := func(t routing.Target) ops.TargetState {
		k := routing.Target{Provider: t.Provider, Model: t.Model, Connection: t.Connection}
		st, ok := states[k]
		if !ok {
			st = p.Ops.TargetState(t.Provider, t.Model, t.Connection)
			states[k] = st
		}
		return st
	}
	var cards []views.ComboCard
	var shapes []views.TargetLive
	for _, cb := range reg.Combos() {
		card := views.ComboCard{ID: cb.ID, Name: cb.Name, Strategy: string(cb.Strategy), MaxAttempts: cb.MaxAttempts,
			GlobalMaxAttempts: routing.MaxAttemptsCap, TargetTimeoutMS: cb.TargetTimeoutMS, WaitUntilReset: cb.WaitUntilReset,
			WaitUntilResetMaxMS: cb.WaitUntilResetMaxMS, UsedBy: reg.UsedBy(cb.Name)}
		for i, t := range cb.Targets {
			row := views.TargetRow{ComboID: cb.ID, Index: i, Key: t.Key(), Label: t.String(), Weight: t.Weight,
				First: i == 0, Last: i == len(cb.Targets)-1}
			live := views.TargetLive{ID: liveID(cb.ID, t)}
			if t.IsCombo() {
				row.Label = t.Combo
				live.Nested, live.NestedAnchor = t.Combo, views.ComboAnchor(t.Combo)
				nestedLive(&live, reg, t.Combo, state)
			} else {
				row.Label, row.Connection = t.Provider+"/"+t.Model, t.Connection
				targetLive(ctx(c), &live, state(t), now)
			}
			row.Live = live
			card.Targets = append(card.Targets, row)
			shapes = append(shapes, liveShape(live))
		}
		cards = append(cards, card)
	}
	return cards, stateVersion(shapes)
}

// liveID is the id of a target's live state element: by the combo and the target itself (not
// its place), so a poll answer computed before a move still lands on the right target.
func liveID(comboID int64, t routing.Target) string {
	h := fnv.New32a()
	h.Write([]byte(t.Key()))
	return fmt.Sprintf("tlive-%d-%08x", comboID, h.Sum32())
}

// targetLive fills a provider target's live state.
func targetLive(ctx context.Context, v *views.TargetLive, st ops.TargetState, now time.Time) {
	v.Breaker, v.Pinned, v.Saturated = st.Breaker, st.Connection, st.Saturated
	if st.PassedOver != "" {
		v.PassedOver = reasonLabel(ctx, st.PassedOver)
	}
	v.Conns = connCounts(st.Connections)
	nowMS := now.UnixMilli()
	switch {
	case st.Usable:
		v.Status = "ready"
	case !st.UsableAt.IsZero():
		v.Status, v.UsableAt, v.UsableInMS = "waiting", st.UsableAt, max(st.UsableAt.UnixMilli()-nowMS, 0)
	default:
		v.Status = "out"
	}
	if !st.ProbeAt.IsZero() {
		v.ProbeAt, v.ProbeInMS = st.ProbeAt, max(st.ProbeAt.UnixMilli()-nowMS, 0)
	}
	for _, l := range st.Lockouts {
		v.Lockouts = append(v.Lockouts, views.TargetLockout{Connection: l.Connection, ExpiresAt: l.Until,
			RemainingMS: max(l.Until.UnixMilli()-nowMS, 0), Anchor: views.LockoutAnchor(st.Provider, l.ConnectionID, l.Target)})
	}
}

// nestedLive fills a combo target's live state: how many provider targets under the nested
// combo are ready now; ready when one is, waiting when one will be, else out.
func nestedLive(v *views.TargetLive, reg *routing.Registry, name string, state func(routing.Target) ops.TargetState) {
	v.Status = "out"
	x, ok := reg.Expand(name)
	if !ok {
		return
	}
	waiting := false
	for _, l := range x.Leaves() {
		v.NestedTotal++
		st := state(l.Target)
		switch {
		case st.Usable:
			v.NestedReady++
		case !st.UsableAt.IsZero():
			waiting = true
		}
	}
	switch {
	case v.NestedReady > 0:
		v.Status = "ready"
	case waiting:
		v.Status = "waiting"
	}
}

// liveShape is a live state without the time left on its countdowns (which the browser ticks
// down itself), so the version changes when something happens, not every second.
func liveShape(v views.TargetLive) views.TargetLive {
	v.UsableInMS, v.ProbeInMS = min(v.UsableInMS, 1), min(v.ProbeInMS, 1)
	v.Lockouts = copyEach(v.Lockouts, func(l *views.TargetLockout) { l.RemainingMS = 0 })
	return v
}

// New answers GET /combos/new.
func (p *CombosPage) New(c echo.Context) error {
	f := views.ComboForm{Strategy: string(routing.Priority), WaitUntilResetMaxMS: strconv.Itoa(routing.DefaultWaitMS),
		Targets: make([]views.TargetForm, newTargetRows)}
	return Render(c, http.StatusOK, views.ComboFormPage(p.formModel(c, f)))
}

// Edit answers GET /combos/:id/edit.
func (p *CombosPage) Edit(c echo.Context) error {
	cb, _, ok, err := itemAt(c, p.Sessions, "/combos", p.Combos.Get)
	if !ok {
		return err
	}
	f := views.ComboForm{ID: cb.ID, Name: cb.Name, Strategy: string(cb.Strategy), MaxAttempts: strconv.Itoa(cb.MaxAttempts),
		TargetTimeoutMS: strconv.FormatInt(cb.TargetTimeoutMS, 10), WaitUntilReset: cb.WaitUntilReset,
		WaitUntilResetMaxMS: strconv.FormatInt(cb.WaitUntilResetMaxMS, 10)}
	for _, t := range cb.Targets {
		row := views.TargetForm{Target: t.Combo, Weight: strconv.Itoa(t.Weight)}
		if !t.IsCombo() {
			row.Target, row.Connection = t.Provider+"/"+t.Model, t.Connection
		}
		f.Targets = append(f.Targets, row)
	}
	return Render(c, http.StatusOK, views.ComboFormPage(p.formModel(c, f)))
}

// Create answers POST /combos: the form's row buttons (op) re-render it, saving creates.
func (p *CombosPage) Create(c echo.Context) error { return p.submit(c, 0) }

// Update answers POST /combos/:id/edit.
func (p *CombosPage) Update(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return p.gone(c)
	}
	return p.submit(c, id)
}

// rowOp is a form button that changes the target rows: add, remove-N, up-N, down-N.
var rowOp = regexp.MustCompile(`^(remove|up|down)-([0-9]{1,3})$`)

// submit handles a post of the combo form (id 0: a new combo).
func (p *CombosPage) submit(c echo.Context, id int64) error {
	f := readComboForm(c)
	f.ID = id
	switch op := c.FormValue("op"); {
	case op == "add":
		f.Targets = append(f.Targets, views.TargetForm{})
		return p.renderForm(c, http.StatusOK, f)
	case rowOp.MatchString(op):
		m := rowOp.FindStringSubmatch(op)
		i, _ := strconv.Atoi(m[2])
		if i < len(f.Targets) {
			switch m[1] {
			case "remove":
				f.Targets = slices.Delete(f.Targets, i, i+1)
			case "up":
				if i > 0 {
					f.Targets[i-1], f.Targets[i] = f.Targets[i], f.Targets[i-1]
				}
			case "down":
				if i < len(f.Targets)-1 {
					f.Targets[i+1], f.Targets[i] = f.Targets[i], f.Targets[i+1]
				}
			}
		}
		return p.renderForm(c, http.StatusOK, f)
	}
	// Rows left empty are not targets.
	f.Targets = slices.DeleteFunc(f.Targets, func(t views.TargetForm) bool { return t.Target == "" && t.Connection == "" })
	in, ok := comboInput(c, &f)
	if !ok {
		return p.renderForm(c, http.StatusUnprocessableEntity, f)
	}
	var cb routing.Combo
	var err error
	if id == 0 {
		cb, err = p.Combos.Create(ctx(c), in)
	} else {
		cb, err = p.Combos.Update(ctx(c), id, in)
	}
	if err != nil {
		if errs.CodeOf(err) == errs.NotFound {
			return p.gone(c)
		}
		if !placeComboErrors(c, err, &f) {
			return err
		}
		return p.renderForm(c, http.StatusUnprocessableEntity, f)
	}
	key := "combos.updated"
	if id == 0 {
		key = "combos.created"
	}
	p.flash(c, "success", i18n.T(ctx(c), key, cb.Name))
	return seeOther(c, "/combos#"+views.ComboAnchor(cb.Name))
}

// readComboForm reads the posted form as typed; the targets come as parallel lists.
func readComboForm(c echo.Context) views.ComboForm {
	form := c.Request().Form
	f := views.ComboForm{Name: strings.TrimSpace(c.FormValue("name")), Strategy: c.FormValue("strategy"),
		MaxAttempts: strings.TrimSpace(c.FormValue("max_attempts")), TargetTimeoutMS: strings.TrimSpace(c.FormValue("target_timeout_ms")),
		WaitUntilReset: c.FormValue("wait_until_reset") == "true", WaitUntilResetMaxMS: strings.TrimSpace(c.FormValue("wait_until_reset_max_ms"))}
	targets, conns, weights := form["target"], form["connection"], form["weight"]
	for i := range min(len(targets), routing.MaxTargets*2) {
		t := views.TargetForm{Target: strings.TrimSpace(targets[i])}
		if i < len(conns) {
			t.Connection = strings.TrimSpace(conns[i])
		}
		if i < len(weights) {
			t.Weight = strings.TrimSpace(weights[i])
		}
		f.Targets = append(f.Targets, t)
	}
	return f
}

// comboInput turns the form into the service's input; ok is false when a number does not parse
// (the errors are on the form then). A target with a "/" is provider/model (everything after the
// first slash is the model), one without names a combo (combo names never have a slash).
func comboInput(c echo.Context, f *views.ComboForm) (routing.Input, bool) {
	f.Errors = views.FieldErrors{}
	bad := i18n.T(ctx(c), "err.whole_number")
	num := func(field, s string, empty int64) *int64 {
		if s == "" {
			return &empty
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			f.Errors[field] = bad
			return nil
		}
		return &v
	}
	in := routing.Input{Name: &f.Name, Strategy: &f.Strategy, WaitUntilReset: &f.WaitUntilReset}
	in.TargetTimeoutMS = num("target_timeout_ms", f.TargetTimeoutMS, 0)
	in.WaitUntilResetMaxMS = num("wait_until_reset_max_ms", f.WaitUntilResetMaxMS, routing.DefaultWaitMS)
	if v := num("max_attempts", f.MaxAttempts, 0); v != nil {
		n := int(max(min(*v, 1<<20), -1)) // out of range either way; kept so the service says why
		in.MaxAttempts = &n
	}
	targets := make([]routing.TargetInput, len(f.Targets))
	ok := len(f.Errors) == 0
	for i := range f.Targets {
		t := &f.Targets[i]
		if prov, model, found := strings.Cut(t.Target, "/"); found {
			targets[i] = routing.TargetInput{Provider: strings.TrimSpace(prov), Model: strings.TrimSpace(model), Connection: t.Connection}
		} else {
			targets[i] = routing.TargetInput{Combo: t.Target, Connection: t.Connection}
		}
		if t.Weight != "" {
			w, err := strconv.Atoi(t.Weight)
			if err != nil {
				t.WeightError, ok = bad, false
				continue
			}
			targets[i].Weight = &w
		}
	}
	in.Targets = &targets
	return in, ok
}

// targetField reads a service field name of a target: "targets[2].combo" → 2, "combo".
var targetField = regexp.MustCompile(`^targets\[([0-9]+)\](?:\.([a-z_]+))?$`)

// placeComboErrors puts a service error's messages on the form: each field's beside it, a
// target's on its row, the rest at the top. It reports false for an internal error.
func placeComboErrors(c echo.Context, err error, f *views.ComboForm) bool {
	var e *errs.Error
	if !errors.As(err, &e) || e.Code == errs.Internal {
		return false
	}
	f.Errors = views.FieldErrors{}
	var rest []string
	for k, m := range e.Fields {
		msg := Text(ctx(c), m)
		if slices.Contains(comboFields, k) {
			f.Errors[k] = msg
			continue
		}
		if sm := targetField.FindStringSubmatch(k); sm != nil {
			if i, _ := strconv.Atoi(sm[1]); i < len(f.Targets) {
				t := &f.Targets[i]
				switch sm[2] {
				case "":
					t.Error = msg
				case "connection":
					t.ConnectionError = msg
				case "weight":
					t.WeightError = msg
				default: // provider, model, combo: all written in the target field
					if t.TargetError != "" {
						msg = t.TargetError + " " + msg
					}
					t.TargetError = msg
				}
				continue
			}
		}
		rest = append(rest, k+": "+msg)
	}
	if len(e.Fields) == 0 {
		rest = append(rest, Text(ctx(c), e.Msg))
	}
	slices.Sort(rest)
	f.Error = strings.Join(rest, "; ")
	return true
}

// renderForm answers with the form: the card alone for htmx (swapped in place), else the page.
func (p *CombosPage) renderForm(c echo.Context, status int, f views.ComboForm) error {
	m := p.formModel(c, f)
	if isHTMX(c) {
		return Render(c, status, views.ComboFormCard(m))
	}
	return Render(c, status, views.ComboFormPage(m))
}

// formModel is the form page's model: the form, the strategies with their help, and the
// suggestions for the target and connection fields.
func (p *CombosPage) formModel(c echo.Context, f views.ComboForm) views.ComboFormModel {
	title, path := i18n.T(ctx(c), "combos.new_title"), "/combos/new"
	if f.ID != 0 {
		title, path = i18n.T(ctx(c), "combos.edit_title", f.Name), idPath("/combos/", f.ID, "/edit")
	}
	m := views.ComboFormModel{Shell: p.shell(c, title, path), Form: f, Strategies: strategyOptions(ctx(c), "strategy")}
	for _, md := range p.Inventory.List() {
		m.Suggestions = append(m.Suggestions, md.ID)
	}
	for _, cb := range p.Combos.Registry().Combos() {
		if cb.ID != f.ID {
			m.Suggestions = append(m.Suggestions, cb.Name)
		}
	}
	reg := p.Catalog.Registry()
	seen := map[string]bool{}
	for _, pr := range reg.Providers() {
		for _, cn := range reg.ConnectionsOf(pr.ID) {
			if !seen[cn.Name] {
				seen[cn.Name] = true
				m.Connections = append(m.Connections, cn.Name)
			}
		}
	}
	slices.Sort(m.Connections)
	return m
}

func idPath(prefix string, id int64, suffix string) string {
	return prefix + strconv.FormatInt(id, 10) + suffix
}

// Delete answers POST /combos/:id/delete; a combo another combo names stays, with a message.
func (p *CombosPage) Delete(c echo.Context) error {
	return deleteAt(c, p.Sessions, "/combos", p.Combos.Get, p.Combos.Delete,
		func(cb routing.Combo) string { return i18n.T(ctx(c), "combos.deleted", cb.Name) })
}

// Move answers POST /combos/:id/move (index, key, dir up|down): the target moves one place and
// the combo is saved. htmx gets the combo's card back; a plain form is redirected to it.
func (p *CombosPage) Move(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return p.gone(c)
	}
	index, err := strconv.Atoi(c.FormValue("index"))
	if err != nil {
		index = -1
	}
	delta := 0
	switch c.FormValue("dir") {
	case "up":
		delta = -1
	case "down":
		delta = 1
	}
	cb, err := p.Combos.MoveTarget(ctx(c), id, index, delta, c.FormValue("key"))
	if err != nil {
		return p.missing(c, err)
	}
	if isHTMX(c) {
		cards, _ := p.cards(c)
		for _, card := range cards {
			if card.ID == cb.ID {
				return Render(c, http.StatusOK, views.ComboCardFragment(card))
			}
		}
	}
	return seeOther(c, "/combos#"+views.ComboAnchor(cb.Name))
}

// missing answers a combo that is gone, or a conflict (a combo in use, or changed meanwhile),
// with a message on the list; any other error is returned.
func (p *CombosPage) missing(c echo.Context, err error) error {
	return listMissing(c, p.Sessions, "/combos", err)
}

// gone answers an action on a combo that no longer exists.
func (p *CombosPage) gone(c echo.Context) error { return listGone(c, p.Sessions, "/combos") }

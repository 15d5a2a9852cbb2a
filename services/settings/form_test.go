package settings

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"switchyard/services/errs"
)

func TestParseNumber(t *testing.T) {
	cases := []struct {
		in      string
		whole   int64
		decimal float64
		wholeOK bool
		decOK   bool
	}{
		{"1800000", 1_800_000, 1_800_000, true, true},
		{"007", 7, 7, true, true},
		{" -3 ", -3, -3, true, true},
		{"0,5", 0, 0.5, false, true},
		{"2.50", 0, 2.5, false, true},
		{"1e3", 0, 0, false, false},
		{"NaN", 0, 0, false, false},
		{"1 000", 0, 0, false, false},
		{"0x10", 0, 0, false, false},
		{"", 0, 0, false, false},
	}
	for _, c := range cases {
		n, m := parseNumber[int64](c.in)
		if (m == nil) != c.wholeOK || (c.wholeOK && n != c.whole) {
			t.Errorf("whole %q = %d, %v", c.in, n, m)
		}
		f, m := parseNumber[float64](c.in)
		if (m == nil) != c.decOK || (c.decOK && f != c.decimal) {
			t.Errorf("decimal %q = %v, %v", c.in, f, m)
		}
	}
	if _, m := parseNumber[int](""); m == nil || m.Key != "err.required" {
		t.Errorf("empty: %v", m)
	}
	if _, m := parseNumber[int]("2.5"); m == nil || m.Key != "err.whole_number" {
		t.Errorf("fraction for a count: %v", m)
	}
	if _, m := parseNumber[float64]("abc"); m == nil || m.Key != "err.number" {
		t.Errorf("no number: %v", m)
	}
}

func TestReadChips(t *testing.T) {
	cases := []struct {
		name          string
		codesOnly     bool
		in            Input
		want, wantBad []string
	}{
		{"typed codes appended, duplicates dropped", true, Input{List: []string{"403", "429"}, Adding: "418, 429 529"}, []string{"403", "429", "418", "529"}, nil},
		{"typed code out of range stays typed", true, Input{List: []string{"403"}, Adding: "700;abc"}, []string{"403"}, []string{"700", "abc"}},
		{"a class is no code", true, Input{Adding: "5xx"}, []string{}, []string{"5xx"}},
		{"classes are statuses, lower-cased", false, Input{List: []string{"429"}, Adding: "5XX 4xx"}, []string{"429", "5xx", "4xx"}, nil},
		{"posted chips are left to validation", false, Input{List: []string{"abc", " 502 "}}, []string{"abc", "502"}, nil},
		{"nothing left", false, Input{}, []string{}, nil},
	}
	for _, c := range cases {
		got, bad := readChips(c.in, c.codesOnly)
		if !slices.Equal(got, c.want) || !slices.Equal(bad, c.wantBad) {
			t.Errorf("%s: got %q bad %q, want %q bad %q", c.name, got, bad, c.want, c.wantBad)
		}
	}
	codes, _ := Lookup("model_lockout.error_codes")
	if _, shown, m := codes.Parse(Input{List: []string{"403", "x"}, Adding: "700"}); m == nil || m.Key != "chips.invalid_code" ||
		m.Args[0] != "x, 700" || shown.Adding != "700" || !slices.Equal(shown.List, []string{"403", "x"}) {
		t.Errorf("a chip that is no code: %v, shown %+v", m, shown)
	}
}

func TestFamiliesText(t *testing.T) {
	fams, _, m := parseFamilies(Input{Text: "# quota families\nanthropic: opus = claude-opus-*, claude-3-opus\n\nanthropic: opus = claude-4-opus\nopenai:gpt5=gpt-5*\n"})
	if m != nil {
		t.Fatal(m)
	}
	want := "anthropic: opus = claude-opus-*, claude-3-opus, claude-4-opus\nopenai: gpt5 = gpt-5*\n"
	if got := formatFamilies(fams); got != want {
		t.Errorf("round trip:\n%s\nwant\n%s", got, want)
	}
	if again, _, _ := parseFamilies(Input{Text: want}); formatFamilies(again) != want {
		t.Error("formatFamilies does not read back")
	}
	if _, _, m := parseFamilies(Input{Text: "openai: a = b\nopenai a b\n"}); m == nil || m.Key != "err.families_line" || m.Args[0] != 2 {
		t.Errorf("bad line reported as %v", m)
	}
	if fams, _, _ := parseFamilies(Input{Text: "openai: empty =\n"}); fams["openai"]["empty"] == nil || len(fams["openai"]["empty"]) != 0 {
		t.Errorf("a family without patterns: %v (validation refuses it)", fams)
	}
}

// Every setting a card can show reads back to the value it shows.
func TestFormRoundTrip(t *testing.T) {
	d := Defaults()
	d.ModelLockout.Families = map[string]map[string][]string{"anthropic": {"opus": {"claude-opus-*", "claude-3-opus"}}}
	for _, st := range registry {
		if st.kind == KindRules {
			continue
		}
		v := st.get(&d)
		in := st.Input(v)
		form := map[string][]string{st.path: {in.Text}}
		if in.List != nil {
			form[st.path] = in.List
		}
		got, _, m := st.Parse(st.FormInput(form))
		if m != nil || !reflect.DeepEqual(got, v) {
			t.Errorf("%s: %#v reads back as %#v (%v)", st.path, v, got, m)
		}
	}
	if flagOff, _ := Lookup("circuit_breaker.enabled"); flagOff != nil {
		if v, _, m := flagOff.Parse(flagOff.FormInput(map[string][]string{})); m != nil || v != false {
			t.Errorf("an unchecked switch reads as %v (%v)", v, m)
		}
	}
}

// A form with several bad fields is refused with every problem at once: the ones met reading
// it and the ones validation finds, and nothing is saved.
func TestReadFormReportsEveryProblemAtOnce(t *testing.T) {
	store := NewMemoryStore()
	s := newService(t, store, nil)
	paths := []string{"retry.max_retries", "retry.initial_backoff_ms", "retry.max_backoff_ms", "retry.backoff_factor",
		"retry.jitter", "retry.retry_on_statuses"}
	form := map[string][]string{
		"retry.max_retries": {"99"}, "retry.initial_backoff_ms": {"1000"}, "retry.max_backoff_ms": {""},
		"retry.backoff_factor": {"2"}, "retry.jitter": {"abc"}, "retry.retry_on_statuses": {"429", "6xx"},
		"retry.retry_on_statuses.add": {"5x"},
	}
	ch, inputs := ReadForm(s.Snapshot(), paths, form)
	_, err := s.Apply(context.Background(), ch)
	var e *errs.Error
	if !errors.As(err, &e) || e.Code != errs.Invalid {
		t.Fatalf("Apply: %v", err)
	}
	want := map[string]string{
		"retry.max_retries":       "err.between",
		"retry.max_backoff_ms":    "err.required",
		"retry.jitter":            "err.number",
		"retry.retry_on_statuses": "chips.invalid_status",
	}
	got := map[string]string{}
	for k, m := range e.Fields {
		got[k] = m.Key
	}
	if !maps.Equal(got, want) {
		t.Errorf("problems %v, want %v", got, want)
	}
	if in := inputs["retry.jitter"]; in.Text != "abc" {
		t.Errorf("the typed text is not kept: %+v", in)
	}
	if in := inputs["retry.retry_on_statuses"]; !slices.Equal(in.List, []string{"429", "6xx"}) || in.Adding != "5x" {
		t.Errorf("the typed list is not kept: %+v", in)
	}
	if _, saves := store.snapshot(); saves != 0 {
		t.Error("a refused form was saved")
	}
}

// Only values that differ from the effective ones are saved, so a value left alone keeps its
// layer.
func TestReadFormSavesOnlyChanges(t *testing.T) {
	store := NewMemoryStore()
	s := newService(t, store, map[string]string{"SWITCHYARD_RETRY_MAX_RETRIES": "4"})
	paths := []string{"retry.max_retries", "retry.jitter", "circuit_breaker.enabled", "model_lockout.error_codes", "model_lockout.families"}
	form := map[string][]string{
		"retry.max_retries": {"4"}, "retry.jitter": {"0,25"}, "model_lockout.error_codes": {"403", "404", "429", "502", "503", "504"},
		"model_lockout.families": {"\r\n"},
	}
	ch, _ := ReadForm(s.Snapshot(), paths, form)
	snap, err := s.Apply(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	if doc, _ := store.snapshot(); doc != `{"circuit_breaker":{"enabled":false},"retry":{"jitter":0.25}}` {
		t.Errorf("saved %s", doc)
	}
	if snap.Source("retry.max_retries") != SourceEnv || snap.Source("model_lockout.error_codes") != SourceDefault {
		t.Errorf("untouched values changed their layer: %v", snap.Sources())
	}
}

func TestApplyRefusesForeignValues(t *testing.T) {
	s := newService(t, NewMemoryStore(), nil)
	ch := NewChanges()
	ch.Set("retry.max_retries", "3")
	if _, err := s.Apply(context.Background(), ch); errs.CodeOf(err) != errs.Internal {
		t.Errorf("a string for a count: %v", err)
	}
	ch = NewChanges()
	ch.Set("retry.max_retry", 3)
	if keys := fieldKeys(t, func() error { _, err := s.Apply(context.Background(), ch); return err }()); !slices.Equal(keys, []string{"retry.max_retry"}) {
		t.Errorf("unknown setting: %v", keys)
	}
}

func TestProviderOverridesValueAndSet(t *testing.T) {
	var p ProviderOverrides
	for _, st := range ProviderOverridable() {
		if !p.Set(st.Path(), st.Default()) {
			t.Errorf("cannot override %s", st.Path())
		}
		if v, ok := p.Value(st.Path()); !ok || !reflect.DeepEqual(v, st.Default()) {
			t.Errorf("%s = %v, %v", st.Path(), v, ok)
		}
	}
	if err := p.Validate(); err != nil {
		t.Errorf("the defaults as overrides: %v", err)
	}
	if p.Set("request_queue.max_wait_ms", int64(5)) || p.Set("retry.max_retries", int64(5)) {
		t.Error("Set took a setting a provider cannot override, or a value of the wrong type")
	}
	p.Set("retry.max_retries", nil)
	if _, ok := p.Value("retry.max_retries"); ok || p.Retry.MaxRetries != nil {
		t.Error("nil does not inherit again")
	}
}

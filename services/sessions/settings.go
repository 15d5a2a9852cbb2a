package sessions

import (
	"encoding/json"
	"time"

	"switchyard/services/settings"
)

// SettingsKey is the key_value key holding the operator's saved session settings. They are
// runtime settings kept apart from the resilience settings document (settings.resilience),
// which describes the gateway's traffic, not its dashboard.
const SettingsKey = "settings.sessions"

// Settings are the lifetimes every session is checked against on each use; a change applies to
// existing sessions at once.
type Settings struct {
	// AbsoluteLifetimeMS ends a session this long after its login, however busy it is
	// (default 7 days; 5 minutes to 90 days).
	AbsoluteLifetimeMS int64 `json:"absolute_lifetime_ms"`
	// IdleTimeoutMS ends a session not used for this long (default 24 hours; 1 minute to 30
	// days; enforced to within a minute, or a quarter of it when that is less).
	IdleTimeoutMS int64 `json:"idle_timeout_ms"`
}

// lifetime is the registry entry describing a lifetime (its default and range are kept there,
// once, for this service and the dashboard's card).
func lifetime(name string) *settings.Setting {
	st, ok := settings.Lookup("sessions." + name)
	if !ok {
		panic("sessions: no registry entry for " + name)
	}
	return st
}

// Defaults are the built-in lifetimes.
func Defaults() Settings {
	return Settings{AbsoluteLifetimeMS: lifetime("absolute_lifetime_ms").Default().(int64),
		IdleTimeoutMS: lifetime("idle_timeout_ms").Default().(int64)}
}

// Absolute is the absolute lifetime as a duration.
func (s Settings) Absolute() time.Duration {
	return time.Duration(s.AbsoluteLifetimeMS) * time.Millisecond
}

// Idle is the idle lifetime as a duration.
func (s Settings) Idle() time.Duration { return time.Duration(s.IdleTimeoutMS) * time.Millisecond }

// ranges are the accepted values of each setting, in ms.
var ranges = func() map[string][2]int64 {
	out := map[string][2]int64{}
	for _, name := range []string{"absolute_lifetime_ms", "idle_timeout_ms"} {
		lo, hi, _ := lifetime(name).Range()
		out[name] = [2]int64{int64(lo), int64(hi)}
	}
	return out
}()

func inRange(name string, v int64) bool {
	r := ranges[name]
	return v >= r[0] && v <= r[1]
}

// saved is what an operator saved; nil fields take their default.
type saved struct {
	AbsoluteLifetimeMS *int64 `json:"absolute_lifetime_ms,omitempty"`
	IdleTimeoutMS      *int64 `json:"idle_timeout_ms,omitempty"`
}

func (s *saved) fields() map[string]**int64 {
	return map[string]**int64{"absolute_lifetime_ms": &s.AbsoluteLifetimeMS, "idle_timeout_ms": &s.IdleTimeoutMS}
}

func (s *saved) effective() Settings {
	out := Defaults()
	if s.AbsoluteLifetimeMS != nil {
		out.AbsoluteLifetimeMS = *s.AbsoluteLifetimeMS
	}
	if s.IdleTimeoutMS != nil {
		out.IdleTimeoutMS = *s.IdleTimeoutMS
	}
	return out
}

// Patch is a partial update of the settings: absent fields stay, null returns one to its
// default.
type Patch struct {
	AbsoluteLifetimeMS Optional `json:"absolute_lifetime_ms"`
	IdleTimeoutMS      Optional `json:"idle_timeout_ms"`
}

func (p *Patch) fields() map[string]*Optional {
	return map[string]*Optional{"absolute_lifetime_ms": &p.AbsoluteLifetimeMS, "idle_timeout_ms": &p.IdleTimeoutMS}
}

// Optional distinguishes an absent field from null in a Patch.
type Optional struct {
	Set   bool
	Value *int64
}

// UnmarshalJSON records that the field was present, and null as a nil Value.
func (o *Optional) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Value = nil
		return nil
	}
	var v int64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	o.Value = &v
	return nil
}

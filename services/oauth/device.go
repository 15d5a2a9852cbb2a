package oauth

import (
	"context"
	"strings"
	"time"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/names"
)

// Device sign-ins (ChatGPT's and GitHub's device codes). A started flow waits here, server-side,
// under a random flow id that is bound to the operator who started it (their session or the
// admin token): the device secret (GitHub's device_code, OpenAI's device_auth_id) never leaves
// the gateway. The operator's page or client polls by flow id; each poll makes at most one call
// upstream, never sooner than the interval the upstream asked for, so a page polling every
// second costs the sign-in service nothing. A flow ends once: approved (the account's connection
// is saved), refused, or expired; after that its id is unknown (404), as is a foreign one.

// maxFlows bounds the device sign-ins waiting for approval; the oldest goes first.
const maxFlows = 64

// slowDownStep is what a slow_down answer adds to a flow's interval (RFC 8628 §3.5).
const slowDownStep = 5 * time.Second

// DeviceFlow is what starting a device sign-in answers: the code to enter at the address, how
// often to poll and until when.
type DeviceFlow struct {
	Flow            string    `json:"flow"`
	UserCode        string    `json:"user_code"`
	VerificationURL string    `json:"verification_url"`
	Interval        int64     `json:"interval"` // seconds
	ExpiresAt       time.Time `json:"expires_at"`
}

// DevicePoll is the outcome of one poll: still pending (with the interval to poll at), or the
// account's connection, created or signed in again.
type DevicePoll struct {
	Pending  bool
	Interval time.Duration
	Conn     catalog.Connection
	Created  bool
}

// deviceFlow is one device sign-in waiting for approval.
type deviceFlow struct {
	id, kind, owner string
	provider, name  string // where the account goes and the connection name ("" = neutral)
	userCode, url   string
	secret          string // the device_code / device_auth_id: only ever sent to the upstream
	interval        time.Duration
	started         time.Time
	expires         time.Time
	nextPoll        time.Time
	polling         bool // a poll is in flight: another one waits its turn (pending)
}

func (f *deviceFlow) view() DeviceFlow {
	return DeviceFlow{Flow: f.id, UserCode: f.userCode, VerificationURL: f.url,
		Interval: int64((f.interval + time.Second - 1) / time.Second), ExpiresAt: f.expires}
}

// addFlow keeps a started device flow and gives it its id.
func (s *Service) addFlow(f *deviceFlow) DeviceFlow {
	now := s.opt.Clock.Now()
	f.id = randomState()
	f.started = now
	f.nextPoll = now.Add(f.interval)
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, g := range s.flows {
		if !now.Before(g.expires) {
			delete(s.flows, k)
		}
	}
	if len(s.flows) >= maxFlows {
		var oldest *deviceFlow
		for _, g := range s.flows {
			if oldest == nil || g.started.Before(oldest.started) {
				oldest = g
			}
		}
		delete(s.flows, oldest.id)
	}
	s.flows[f.id] = f
	return f.view()
}

// Flow returns a device flow of kind that owner started and that still waits (for a page that
// shows it again); ok is false for an unknown, foreign, ended or expired one.
func (s *Service) Flow(kind, id, owner string) (DeviceFlow, bool) {
	now := s.opt.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flows[id]
	if f == nil || f.kind != kind || f.owner != owner || !now.Before(f.expires) {
		return DeviceFlow{}, false
	}
	return f.view(), true
}

// pollStep is what one upstream poll of a device flow found.
type pollStep int

const (
	stepPending  pollStep = iota // not approved yet
	stepSlowDown                 // not approved yet, and poll less often
	stepDone                     // approved: the credential is there
)

// pollFlow runs one poll of device flow id for owner: without an upstream call while the
// interval has not passed (or another poll runs); else step asks the upstream once. step returns
// the credential when the flow is approved, and an error when it is refused or broken (the flow
// then ends). The approved account is saved on the flow's provider.
func (s *Service) pollFlow(ctx context.Context, kind, id, owner string,
	step func(ctx context.Context, f *deviceFlow) (pollStep, catalog.OAuthCredential, error)) (DevicePoll, error) {
	now := s.opt.Clock.Now()
	s.mu.Lock()
	f := s.flows[id]
	switch {
	case f == nil || f.kind != kind || f.owner != owner:
		s.mu.Unlock()
		return DevicePoll{}, errs.New(errs.NotFound, "oauth.flow_unknown")
	case !now.Before(f.expires):
		delete(s.flows, id)
		s.mu.Unlock()
		return DevicePoll{}, errs.New(errs.NotFound, "oauth.flow_unknown")
	case f.polling || now.Before(f.nextPoll):
		s.mu.Unlock()
		return DevicePoll{Pending: true, Interval: f.interval}, nil
	}
	f.polling = true
	s.mu.Unlock()

	res, cred, err := step(ctx, f)

	// The interval counts from this poll's start, as the upstream counts its requests: a poll
	// that waited on a slow answer does not push the next one later, and a flow approved while
	// this call was on its way is picked up by the first poll one interval after it.
	s.mu.Lock()
	f.polling = false
	switch {
	case err != nil:
		delete(s.flows, id)
	case res == stepSlowDown:
		f.interval += slowDownStep
		f.nextPoll = now.Add(f.interval)
	case res == stepPending:
		f.nextPoll = now.Add(f.interval)
	default:
		delete(s.flows, id) // approved: once
	}
	interval := f.interval
	s.mu.Unlock()
	if err != nil {
		return DevicePoll{}, err
	}
	if res != stepDone {
		return DevicePoll{Pending: true, Interval: interval}, nil
	}
	conn, created, err := s.opt.Catalog.SaveOAuthAccount(ctx, f.provider, f.name, cred)
	if err != nil {
		return DevicePoll{}, err
	}
	s.opt.Log.Info("account signed in with a device code", "kind", kind, "provider", f.provider,
		"connection_id", conn.ID, "created", created)
	return DevicePoll{Conn: conn, Created: created}, nil
}

// providerOf checks that provider (default: the kind's own name, as the provider a fresh install
// would have) exists and is of type kind, and returns its name.
func (s *Service) providerOf(kind, provider string) (string, error) {
	if provider == "" {
		provider = kind
	}
	p, ok := s.opt.Catalog.Registry().Provider(provider)
	switch {
	case !ok:
		return "", errs.Field("provider", "err.no_provider")
	case p.Type != kind:
		return "", errs.Field("provider", "err.account_provider", kind)
	}
	return provider, nil
}

// accountTarget checks where a sign-in of kind puts its account: provider (providerOf) and the
// connection name chosen ("" = the kind's next free name, such as chatgpt-N).
func (s *Service) accountTarget(kind, provider, name string) (string, string, error) {
	name = strings.TrimSpace(name)
	if err := checkName(name); err != nil {
		return "", "", err
	}
	provider, err := s.providerOf(kind, strings.TrimSpace(provider))
	if err != nil {
		return "", "", err
	}
	return provider, name, nil
}

// checkName checks a chosen connection name ("" = the kind's next free name).
func checkName(name string) error {
	if name != "" {
		if m, bad := names.Check(name); bad {
			return errs.Fields(map[string]errs.Msg{"name": m})
		}
	}
	return nil
}

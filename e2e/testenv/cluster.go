package testenv

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db/dbtest"
)

// NewReplicas starts n gateways sharing one fresh PostgreSQL database, one secret key and one
// fake clock, as replicas behind a load balancer; extra holds variables every replica also
// sees (SWITCHYARD_REDIS_URL). Each stops with the test.
func NewReplicas(t testing.TB, n int, extra map[string]string, args ...string) []*Env {
	t.Helper()
	return NewReplicasOn(t, dbtest.Postgres(t), n, extra, args...)
}

// NewReplicasOn is NewReplicas on the PostgreSQL database at url.
func NewReplicasOn(t testing.TB, url string, n int, extra map[string]string, args ...string) []*Env {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Now())
	out := make([]*Env, n)
	for i := range out {
		e := &Env{T: t, DataDir: t.TempDir(), Logs: &SyncBuffer{}, Clock: clock, Args: args,
			Vars: map[string]string{"SWITCHYARD_ADMIN_TOKEN": AdminToken, "SWITCHYARD_ADMIN_PASSWORD": Password,
				"SWITCHYARD_DATABASE_URL": url, "SWITCHYARD_SECRET_KEY": SecretKey}}
		for k, v := range extra {
			e.Vars[k] = v
		}
		e.Start()
		out[i] = e
	}
	return out
}

// AwayFromMidnight advances clock, when the UTC day ends within d of its time, to the first
// minute of the next day. The fake clocks start at the real time, and daily budgets and spend
// reset at midnight (UTC unless a time zone is set): a test that spends and then advances the
// clock by up to d stays within one day whatever the hour it runs at. Call it before anything
// is spent.
func AwayFromMidnight(clock *clockwork.FakeClock, d time.Duration) {
	now := clock.Now().UTC()
	if midnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour); midnight.Sub(now) < d {
		clock.Advance(midnight.Sub(now) + time.Minute)
	}
}

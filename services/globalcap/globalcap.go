// Package globalcap holds each connection's max_concurrent across every replica of the gateway.
// A slot is a lease in Redis that its replica renews while the request runs: a replica that
// dies, even by SIGKILL, stops renewing, and its slots come free within the lease time, so a
// crash never strands capacity. The line of requests waiting for a slot is kept in Redis too,
// with the same leases, so its depth counts the waiters of every replica and a dead replica's
// waiters drop out of it.
//
// The Limiter is the shared store of resilience.Semaphores (resilience.SharedSlots). While
// Redis does not answer, Healthy reports false and the semaphores enforce each replica's share
// of the cap alone; no call waits on Redis for longer than Options.CallTimeout.
package globalcap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"switchyard/services/resilience"
)

var _ resilience.SharedSlots = (*Limiter)(nil)

// ErrClosed is returned by calls on a closed Limiter.
var ErrClosed = errors.New("globalcap: limiter closed")

// Options configure a Limiter. Zero fields take the documented defaults.
type Options struct {
	// Replica names this replica in the members of its leases, so that whoever reads Redis can
	// tell whose they are. Default: the host name.
	Replica string
	// LeaseTTL is how long a slot outlives its replica's last renewal: the longest a dead
	// replica's slots stay taken. Default 15 s.
	LeaseTTL time.Duration
	// Renew is how often held leases are renewed (and Redis is probed while none are).
	// Default LeaseTTL/3, so a lease survives two failed renewals; at most LeaseTTL/2.
	Renew time.Duration
	// Poll is the longest a waiter goes without looking again. Releases wake waiters at once
	// through pub/sub, but a slot freed by a lease running out sends no message and pub/sub
	// delivers at most once; a waiter also looks when the earliest lease would run out. Its
	// place in line is renewed each time it looks. Default Renew; at most LeaseTTL/2.
	Poll time.Duration
	// CallTimeout bounds each round trip to Redis. Default 250 ms.
	CallTimeout time.Duration
	// Prefix starts every key and channel name. Default "switchyard:cap:".
	Prefix string
	// Clock drives renewals and waits; leases themselves run out on Redis's clock. Default: the
	// real clock.
	Clock clockwork.Clock
	// Log receives the changes of Redis's health and lost leases. Default: discarded.
	Log *slog.Logger
}

// Defaults of Options.
const (
	DefaultLeaseTTL    = 15 * time.Second
	DefaultCallTimeout = 250 * time.Millisecond
	DefaultPrefix      = "switchyard:cap:"
)

func (o Options) withDefaults() Options {
	if o.Replica == "" {
		o.Replica, _ = os.Hostname()
		if o.Replica == "" {
			o.Replica = "replica"
		}
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Renew <= 0 {
		o.Renew = o.LeaseTTL / 3
	}
	o.Renew = min(o.Renew, o.LeaseTTL/2)
	if o.Poll <= 0 {
		o.Poll = o.Renew
	}
	o.Poll = min(o.Poll, o.LeaseTTL/2)
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Limiter takes and renews the leases of one replica. It owns two goroutines, the renewer and
// the pub/sub listener, which end on Close.
type Limiter struct {
	client  *redis.Client
	owned   bool // Close closes client
	opt     Options
	ttlMS   int64
	channel string
	boot    string // tells this process's members from an earlier run's under the same Replica
	seq     atomic.Uint64
	ps      *redis.PubSub

	healthy atomic.Bool
	wake    wakeHub

	mu      sync.Mutex
	held    map[int64]*connLeases
	orphans []orphan
	err     error // the last failure while unhealthy

	ctx       context.Context // ends on Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// connLeases are the leases this replica holds on one connection.
type connLeases struct {
	cap     int             // the latest cap asked for, which a lost lease is taken again under
	members map[string]bool // member → lost
}

// orphan is a member that may still be in Redis although no request holds it: its release
// failed, or its grant did not reach this replica. The renewer removes it.
type orphan struct {
	conn   int64
	member string
	at     time.Time
}

// New builds a Limiter on client, which stays the caller's to close after the Limiter. For
// calls to end within CallTimeout the client needs ContextTimeoutEnabled (Open sets it).
func New(client *redis.Client, opt Options) *Limiter {
	opt = opt.withDefaults()
	var boot [6]byte
	for i := range boot {
		boot[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[rand.IntN(36)]
	}
	l := &Limiter{client: client, opt: opt, ttlMS: opt.LeaseTTL.Milliseconds(), channel: opt.Prefix + "released",
		boot: string(boot[:]), held: map[int64]*connLeases{}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	ctx, cancel := context.WithTimeout(l.ctx, opt.CallTimeout)
	err := client.Ping(ctx).Err()
	// A subscription that cannot be made now is made by the listener once Redis answers.
	l.ps = client.Subscribe(ctx, l.channel)
	cancel()
	l.healthy.Store(err == nil)
	if err != nil {
		l.err = err
		opt.Log.Warn("redis unreachable: each replica enforces its share of connection caps alone", "err", err)
	}
	l.wg.Add(2)
	go l.renewLoop()
	go l.listen()
	return l
}

// Open connects to the Redis at rawURL (redis://, rediss:// or unix://) and builds a Limiter that
// owns the connection.
func Open(rawURL string, opt Options) (*Limiter, error) {
	ro, err := redis.ParseURL(rawURL)
	if err != nil {
		// url.Error repeats the URL, password included.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("globalcap: parse the Redis URL: %w", err)
	}
	opt = opt.withDefaults()
	ro.ContextTimeoutEnabled = true
	if ro.DialTimeout == 0 {
		ro.DialTimeout = opt.CallTimeout
	}
	if ro.PoolTimeout == 0 {
		ro.PoolTimeout = opt.CallTimeout
	}
	if ro.DialerRetries == 0 {
		ro.DialerRetries = 1 // a refused dial is not worth retrying within CallTimeout
	}
	l := New(redis.NewClient(ro), opt)
	l.owned = true
	return l, nil
}

// Close stops renewing and listening and, for a Limiter made by Open, closes its connection.
// Leases still held are not given back, as their requests may still run: they run out within
// LeaseTTL, like those of a replica that died. Calls waiting for a slot return ErrClosed.
func (l *Limiter) Close() error {
	l.closeOnce.Do(func() {
		l.cancel()
		_ = l.ps.Close()
		l.wg.Wait()
		if l.owned {
			l.closeErr = l.client.Close()
		}
	})
	return l.closeErr
}

// Healthy reports whether Redis answered the latest call.
func (l *Limiter) Healthy() bool { return l.healthy.Load() }

// Err returns the failure that made the Limiter unhealthy; nil while it is healthy.
func (l *Limiter) Err() error {
	if l.healthy.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Acquire takes one of the connection's capacity slots as a lease, waiting for at most maxWait
// in the connection's line, unless maxLine requests (of every replica together; <= 0 =
// unbounded) already wait. capacity <= 0 means unlimited. It returns the idempotent release and
// nil, or resilience.ErrSlotLineFull, resilience.ErrSlotTimeout, ctx's error, ErrClosed, or the
// failure of a Redis call that did not answer within CallTimeout.
func (l *Limiter) Acquire(ctx context.Context, connID int64, capacity int, maxWait time.Duration, maxLine int) (release func(), err error) {
	if capacity <= 0 {
		return noRelease, nil
	}
	if l.ctx.Err() != nil {
		return noRelease, ErrClosed
	}
	keys, member := l.keys(connID), l.member()
	deadline := l.opt.Clock.NewTimer(max(maxWait, 0))
	defer deadline.Stop()
	for {
		// Watch before asking, so that a release between the answer and the wait still wakes.
		woken := l.wake.watch(connID)
		res, err := l.run(ctx, 4, acquireScript, keys, member, capacity, l.ttlMS, "queue", maxLine)
		if err != nil {
			// The script may have run although its answer never came: a lease or a place in
			// line may be there with nobody to renew or release it.
			l.leave(connID, member)
			return noRelease, err
		}
		switch res[0] {
		case 1:
			return l.hold(connID, member, capacity), nil
		case -1:
			return noRelease, resilience.ErrSlotLineFull
		}
		poll := l.opt.Clock.NewTimer(l.pollDelay(res[3]))
		select {
		case <-woken:
			poll.Stop()
			continue
		case <-poll.Chan():
			continue
		case <-deadline.Chan():
			err = resilience.ErrSlotTimeout
		case <-ctx.Done():
			err = ctx.Err()
		case <-l.ctx.Done():
			err = ErrClosed
		}
		poll.Stop()
		l.leave(connID, member)
		return noRelease, err
	}
}

// TryAcquire takes one of the connection's capacity slots as a lease only if one is free now
// and no request waits for one; otherwise it returns resilience.ErrSlotsTaken (or the failure
// of Redis, or ErrClosed). It never waits for more than one round trip.
func (l *Limiter) TryAcquire(ctx context.Context, connID int64, capacity int) (release func(), err error) {
	if capacity <= 0 {
		return noRelease, nil
	}
	if l.ctx.Err() != nil {
		return noRelease, ErrClosed
	}
	member := l.member()
	res, err := l.run(ctx, 4, acquireScript, l.keys(connID), member, capacity, l.ttlMS, "try", 0)
	if err != nil {
		l.leave(connID, member) // as in Acquire
		return noRelease, err
	}
	if res[0] == 1 {
		return l.hold(connID, member, capacity), nil
	}
	return noRelease, resilience.ErrSlotsTaken
}

// Counts reads how many leases (of every replica) the connection has, and how many requests
// wait for one. It is a round trip to Redis: meant for a dashboard, not for every request.
func (l *Limiter) Counts(ctx context.Context, connID int64) (holding, waiting int, err error) {
	res, err := l.run(ctx, 2, countScript, l.keys(connID))
	if err != nil {
		return 0, 0, err
	}
	return int(res[0]), int(res[1]), nil
}

func noRelease() {}

// KeySlots are client keys' max_parallel slots (spend.ParallelSlots) in the store of the
// connections' caps, with the same leases, renewals and expiry. A key's slots are kept under
// the negated key id, so they never meet a connection's (ids start at 1).
type KeySlots struct{ Limiter *Limiter }

// Healthy says whether Redis answers now.
func (k KeySlots) Healthy() bool { return k.Limiter.Healthy() }

// TryTake takes one of the key's n slots if one is free now; taken is false when all are held.
func (k KeySlots) TryTake(ctx context.Context, keyID int64, n int) (release func(), taken bool, err error) {
	release, err = k.Limiter.TryAcquire(ctx, -keyID, n)
	switch {
	case errors.Is(err, resilience.ErrSlotsTaken):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return release, true, nil
}

// keys are the connection's lease and waiter sets.
func (l *Limiter) keys(connID int64) []string {
	tag := l.opt.Prefix + "{" + strconv.FormatInt(connID, 10) + "}"
	return []string{tag + ":leases", tag + ":waiters"}
}

// member names one lease or place in line: unique across replicas and restarts.
func (l *Limiter) member() string {
	return l.opt.Replica + "/" + l.boot + "/" + strconv.FormatUint(l.seq.Add(1), 36)
}

// run runs a script that answers n integers, within CallTimeout.
func (l *Limiter) run(ctx context.Context, n int, s *redis.Script, keys []string, args ...any) ([]int64, error) {
	cctx, cancel := context.WithTimeout(ctx, l.opt.CallTimeout)
	defer cancel()
	res, err := s.Run(cctx, l.client, keys, args...).Int64Slice()
	if err == nil && len(res) != n {
		err = fmt.Errorf("unexpected answer %v", res)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		err = fmt.Errorf("globalcap: redis: %w", err)
	}
	l.observe(ctx, err)
	return res, err
}

// observe records the outcome of a call to Redis. A call cut short by its caller (a client
// that went away) or by Close says nothing about Redis.
func (l *Limiter) observe(ctx context.Context, err error) {
	if err == nil {
		if !l.healthy.Swap(true) {
			l.opt.Log.Info("redis answers again: connection caps hold across replicas")
		}
		return
	}
	if ctx.Err() != nil || l.ctx.Err() != nil {
		return
	}
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
	if l.healthy.Swap(false) {
		l.opt.Log.Warn("redis unreachable: each replica enforces its share of connection caps alone", "err", err)
		// Waiters look again now, fail, and fall back to the local line instead of waiting
		// out their poll.
		l.wake.wakeAll()
	}
}

// hold registers a granted lease for renewal and returns its release.
func (l *Limiter) hold(connID int64, member string, capacity int) func() {
	l.mu.Lock()
	cl := l.held[connID]
	if cl == nil {
		cl = &connLeases{members: map[string]bool{}}
		l.held[connID] = cl
	}
	cl.cap = capacity
	cl.members[member] = false
	l.mu.Unlock()
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			l.release(connID, member)
		}
	}
}

// release gives a lease back. It stops renewing it first, so that nothing takes it again
// after the removal. When Redis is known to be down it does not wait for it: the renewer
// removes the lease once Redis answers, or it runs out.
func (l *Limiter) release(connID int64, member string) {
	l.mu.Lock()
	if cl := l.held[connID]; cl != nil {
		delete(cl.members, member)
		if len(cl.members) == 0 {
			delete(l.held, connID)
		}
	}
	l.mu.Unlock()
	if !l.healthy.Load() || l.ctx.Err() != nil {
		l.orphan(connID, member)
		return
	}
	if _, err := l.runRelease(context.Background(), connID, member); err != nil {
		l.orphan(connID, member)
	}
	// Waiters of this replica need not wait for the message to come back.
	l.wake.wake(connID)
}

// leave takes a waiter out of the line (and drops a lease granted to it unawares). The caller
// may have gone, so the call does not use its context; with Redis known to be down it leaves
// the removal to the renewer rather than wait for another timeout.
func (l *Limiter) leave(connID int64, member string) {
	if !l.healthy.Load() {
		l.orphan(connID, member)
		return
	}
	if _, err := l.runRelease(context.Background(), connID, member); err != nil {
		l.orphan(connID, member)
	}
}

func (l *Limiter) runRelease(ctx context.Context, connID int64, member string) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, l.opt.CallTimeout)
	defer cancel()
	n, err := releaseScript.Run(cctx, l.client, l.keys(connID), member, l.channel, connID).Int64()
	if err != nil {
		err = fmt.Errorf("globalcap: redis: %w", err)
	}
	l.observe(ctx, err)
	return n, err
}

// orphan leaves a member to the renewer to remove.
func (l *Limiter) orphan(connID int64, member string) {
	if l.ctx.Err() != nil {
		return // no renewer any more: it runs out
	}
	l.mu.Lock()
	l.orphans = append(l.orphans, orphan{conn: connID, member: member, at: l.opt.Clock.Now()})
	l.mu.Unlock()
}

// pollDelay is how long a waiter waits before looking again: Poll, or until just after the
// earliest lease would run out when that is sooner (untilExpiry ms; -1 = no lease). The jitter
// keeps the waiters of every replica, woken by the same expiry, from all asking at once.
func (l *Limiter) pollDelay(untilExpiry int64) time.Duration {
	d := l.opt.Poll
	if untilExpiry >= 0 {
		d = min(d, time.Duration(untilExpiry)*time.Millisecond+time.Millisecond)
	}
	return d + rand.N(d/10+time.Millisecond)
}

// isTimeout reports whether err is a read that timed out, which a pub/sub receive with a
// timeout returns when nothing was published.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Package cluster carries changes between replicas that share one PostgreSQL database: each
// replica publishes what it changed (a resilience record, or "this part of the configuration
// changed") and applies what the others publish to its own memory, so the request path keeps
// reading memory only. The carrier is PostgreSQL's LISTEN/NOTIFY: no broker beside the
// database the replicas need anyway.
//
// A message is a hint, not the record of truth: the store is. A replica that was cut off from
// the database resynchronises from the store when it reconnects, since NOTIFY does not replay
// what a listener missed.
package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"switchyard/services/writebehind"
)

// Channel is the NOTIFY channel every replica listens on.
const Channel = "switchyard_changes"

// maxPayload keeps one NOTIFY below PostgreSQL's 8000-byte payload limit.
const maxPayload = 7800

// TopicState is the topic of resilience records; the others name a part of the configuration.
const TopicState = "state"

// Message is one change a replica tells the others.
type Message struct {
	// From is the publishing replica; a replica ignores its own messages.
	From string `json:"f"`
	// Topic is TopicState or the configuration part that changed (its service's topic).
	Topic string `json:"t"`
	// Kind, ID and Value are a resilience record's kind, identity and value (null: deleted).
	Kind  string          `json:"k,omitempty"`
	ID    json.RawMessage `json:"i,omitempty"`
	Value json.RawMessage `json:"v,omitempty"`
}

type msgKey struct{ topic, kind, id string }

// Options configure a Bus.
type Options struct {
	// URL is the PostgreSQL database the replicas share.
	URL string
	// Replica is this replica's id.
	Replica string
	Log     *slog.Logger
	// Handle applies a message from another replica. It runs on the listening goroutine, one
	// message at a time, in the order they were published by each replica.
	Handle func(Message)
	// Resync loads everything from the store again; it runs after every (re)connection of the
	// listener, once LISTEN is in place, so that nothing published while this replica was not
	// listening is lost.
	Resync func(ctx context.Context) error
	// Retry is the pause between reconnection attempts (default 250 ms, doubling to 5 s).
	Retry time.Duration
}

// Bus publishes this replica's changes and applies the others'.
type Bus struct {
	opt     Options
	out     *writebehind.Queue[msgKey, Message]
	pub     *pgx.Conn // used by the queue's flushes only, which are serialised
	healthy atomic.Bool
	mu      sync.Mutex
	lastErr error
	// listening is closed once the first LISTEN is in place (tests wait on it).
	listening chan struct{}
	once      sync.Once
}

// New builds a bus; Run connects it.
func New(opt Options) *Bus {
	if opt.Retry <= 0 {
		opt.Retry = 250 * time.Millisecond
	}
	b := &Bus{opt: opt, listening: make(chan struct{})}
	b.out = writebehind.New("replica broadcast", opt.Log, b.send)
	return b
}

// Publish queues a message for the other replicas; it never blocks on I/O. Messages about the
// same record or configuration part coalesce: only the newest is sent.
func (b *Bus) Publish(m Message) {
	m.From = b.opt.Replica
	b.out.Put(msgKey{m.Topic, m.Kind, string(m.ID)}, m)
}

// PublishTopic tells the other replicas that a part of the configuration changed.
func (b *Bus) PublishTopic(topic string) { b.Publish(Message{Topic: topic}) }

// Healthy reports whether the listener is connected; Err is the last connection error.
func (b *Bus) Healthy() bool { return b.healthy.Load() }

// Err is the last error of the listener or the publisher, nil while healthy.
func (b *Bus) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastErr
}

// Listening is closed once the listener has been in place once.
func (b *Bus) Listening() <-chan struct{} { return b.listening }

func (b *Bus) setErr(err error) {
	b.mu.Lock()
	b.lastErr = err
	b.mu.Unlock()
}

// Run listens and publishes until ctx ends; then it sends what is still queued (best effort).
func (b *Bus) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.out.Run(ctx) // it also retries a batch the database refused
	}()
	b.listen(ctx)
	wg.Wait()
	if b.pub != nil {
		_ = b.pub.Close(context.Background())
	}
}

func (b *Bus) listen(ctx context.Context) {
	wait := b.opt.Retry
	for ctx.Err() == nil {
		err := b.listenOnce(ctx)
		b.healthy.Store(false)
		if ctx.Err() != nil {
			return
		}
		b.setErr(err)
		b.opt.Log.Warn("replica broadcast: listener lost the database; reconnecting", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// listenOnce connects, listens, resynchronises and applies messages until the connection fails.
func (b *Bus) listenOnce(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := pgx.Connect(cctx, b.opt.URL)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	if b.opt.Resync != nil {
		if err := b.opt.Resync(ctx); err != nil {
			return fmt.Errorf("resync from the store: %w", err)
		}
	}
	b.healthy.Store(true)
	b.setErr(nil)
	b.once.Do(func() { close(b.listening) })
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var batch []Message
		if err := json.Unmarshal([]byte(n.Payload), &batch); err != nil {
			b.opt.Log.Warn("replica broadcast: unreadable message", "error", err)
			continue
		}
		for _, m := range batch {
			if m.From != b.opt.Replica {
				b.opt.Handle(m)
			}
		}
	}
}

// send publishes one batch of queued messages: as few NOTIFYs as fit them, in one transaction,
// so the other replicas receive the batch together.
func (b *Bus) send(ctx context.Context, batch map[msgKey]Message) error {
	if b.pub == nil || b.pub.IsClosed() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(cctx, b.opt.URL)
		cancel()
		if err != nil {
			b.setErr(err)
			return fmt.Errorf("connect: %w", err)
		}
		b.pub = conn
	}
	payloads, dropped := pack(batch)
	for _, m := range dropped {
		// Never sent, so never retried: the store still has the change, and the other replicas
		// see it at their next resynchronisation.
		b.opt.Log.Warn("replica broadcast: a message too large for NOTIFY is not sent", "topic", m.Topic, "kind", m.Kind)
	}
	err := pgx.BeginFunc(ctx, b.pub, func(tx pgx.Tx) error {
		for _, p := range payloads {
			if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = b.pub.Close(context.WithoutCancel(ctx))
		b.pub = nil
		b.setErr(err)
		return err
	}
	return nil
}

// pack encodes messages as JSON arrays of at most maxPayload bytes each; a message that cannot
// be encoded or fit alone is left out and returned.
func pack(batch map[msgKey]Message) (payloads []string, dropped []Message) {
	var out []string
	cur := []byte{'['}
	for _, m := range batch {
		enc, err := json.Marshal(m)
		if err != nil || len(enc)+2 > maxPayload {
			dropped = append(dropped, m)
			continue
		}
		if len(cur)+len(enc)+1 > maxPayload {
			out = append(out, string(append(cur, ']')))
			cur = []byte{'['}
		}
		if len(cur) > 1 {
			cur = append(cur, ',')
		}
		cur = append(cur, enc...)
	}
	if len(cur) > 1 {
		out = append(out, string(append(cur, ']')))
	}
	return out, dropped
}

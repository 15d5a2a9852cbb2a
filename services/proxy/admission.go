package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// semaphoreLine bounds the quota-share line when no queue depth is configured; past it requests
// proceed without a slot (fail-open).
const semaphoreLine = 10_000

// heartbeatEvery is how often a streaming request that waits for its connection gets an SSE
// comment, so clients with first-byte timeouts keep waiting.
const heartbeatEvery = 15 * time.Second

// queueConfig is the connection's effective request queue: global settings, overridden per
// connection, plus the connection's own pacing limits.
func queueConfig(snap *settings.Snapshot, conn *catalog.ConnEntry) resilience.QueueConfig {
	rq := snap.RequestQueueValues(conn.Settings)
	o := conn.Settings.RequestQueue
	cfg := resilience.QueueConfig{MaxWait: ms(rq.MaxWaitMS), ExecutionMaxWait: ms(rq.ExecutionMaxWaitMS),
		MaxDepth: rq.MaxQueueDepth}
	if o.RequestsPerMinute != nil {
		cfg.RPM = *o.RequestsPerMinute
	}
	if o.MinGapMS != nil {
		cfg.MinGap = ms(*o.MinGapMS)
	}
	if o.MaxConcurrentExecutions != nil {
		cfg.MaxConcurrentExecutions = *o.MaxConcurrentExecutions
	}
	return cfg
}

// waiting is how many requests wait for the connection, in its queue or its quota-share line.
func (e *Engine) waiting(connID int64) int {
	return e.opt.Queues.Stats(connID).Waiting + e.opt.Semaphores.Stats(connID).Waiting
}

// admitQueue is the cheap admission check made before the request body is validated: when every
// connection that could serve the target already has max_queue_depth requests waiting, the
// request is turned away at once with RATE_LIMIT_QUEUE_FULL. Anything it cannot decide (no
// connections) is left to the full path.
func (e *Engine) admitQueue(t target) *errs.Error {
	snap := e.opt.Settings.Snapshot()
	if snap.Resilience().RequestQueue.MaxQueueDepth == 0 && !e.opt.Catalog.Registry().QueueDepthOverrides() {
		return nil // no queue depth anywhere: nothing can be full
	}
	if len(t.provider.Conns) == 0 {
		return nil
	}
	var first *catalog.ConnEntry
	var maxWait time.Duration
	for _, conn := range t.provider.Conns {
		cfg := queueConfig(snap, conn)
		if resilience.Admit(e.waiting(conn.ID), cfg.MaxDepth).Admit {
			return nil
		}
		if first == nil {
			first, maxWait = conn, cfg.MaxWait
		}
	}
	e.opt.Observer.QueueRejected(t.provider.Name, first.Label, resilience.CodeQueueFull)
	return queueFull(t.provider.Name, maxWait)
}

func queueFull(provider string, maxWait time.Duration) *errs.Error {
	e := withRetry(fail(errs.RateLimited, resilience.CodeQueueFull, "proxy.queue_full", provider), min(max(maxWait, time.Second), time.Minute))
	e.Header = http.Header{"X-Should-Retry": {"true"}}
	return e
}

// admission is what a request holds while it runs on a connection.
type admission struct {
	slot     resilience.Slot
	release  func() // quota-share slot; no-op when none is held
	deadline time.Duration
	released bool
}

// done gives the queue slot and the quota-share slot back, once: the attempt's end calls it,
// and a deferred call covers a panic on the way.
func (a *admission) done() {
	if a.released {
		return
	}
	a.released = true
	a.slot.Release()
	a.release()
}

// admit waits for the connection: queue admission and pacing (strict: full or timed out →
// error), then its quota-share slot (fail-open). Streaming clients get heartbeats while waiting.
// full reports a full queue, which lets the caller try another connection. With spill, a
// connection whose quota-share slots are all taken is not waited for: busy reports it, and the
// caller moves to a sibling with room.
func (e *Engine) admit(ctx context.Context, w http.ResponseWriter, c *call, conn *catalog.ConnEntry, spill bool) (a admission, perr *errs.Error, full, busy bool) {
	cfg := queueConfig(c.snap, conn)
	p := c.t.provider.Name
	if !resilience.Admit(e.waiting(conn.ID), cfg.MaxDepth).Admit {
		e.opt.Observer.QueueRejected(p, conn.Label, resilience.CodeQueueFull)
		return a, queueFull(p, cfg.MaxWait), true, false
	}
	hb := e.heartbeats(c, w)
	defer hb.stop()
	slot, qerr := e.opt.Queues.Acquire(ctx, conn.ID, cfg, resilience.AcquireHooks{})
	if qerr != nil {
		switch qerr.Code {
		case resilience.CodeClientClosed:
			return a, clientGone(), false, false
		case resilience.CodeQueueFull:
			e.opt.Observer.QueueRejected(p, conn.Label, qerr.Code)
			return a, queueFull(p, cfg.MaxWait), true, false
		}
		e.opt.Observer.QueueRejected(p, conn.Label, qerr.Code)
		qe := withRetry(fail(errs.CodeForStatus(qerr.Status), qerr.Code, "proxy.queue_timeout", conn.Label, p, cfg.MaxWait.String()), qerr.RetryAfter)
		qe.Status = qerr.Status
		return a, qe, false, false
	}
	a = admission{slot: slot, release: func() {}}
	a.deadline = slot.ExecutionDeadline(ms(c.snap.Resilience().Streams.FirstByteTimeoutMS))
	if conn.MaxConcurrent > 0 && c.snap.Resilience().QuotaShareConcurrency.Enabled && spill {
		rel, ok := e.opt.Semaphores.TryAcquire(conn.ID, conn.MaxConcurrent)
		if !ok {
			slot.Release()
			return admission{}, nil, false, true
		}
		a.release = rel
		return a, nil, false, false
	}
	if conn.MaxConcurrent > 0 && c.snap.Resilience().QuotaShareConcurrency.Enabled {
		// The check above counts this replica's waiters only; the line's own bound counts those
		// of every replica when the semaphores share their slots, and a full line is then a full
		// queue like any other.
		line := semaphoreLine
		if cfg.MaxDepth > 0 {
			line = cfg.MaxDepth
		}
		rel, err := e.opt.Semaphores.AcquireSlot(ctx, conn.ID, conn.MaxConcurrent, cfg.MaxWait, line)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			slot.Release()
			return admission{}, clientGone(), false, false
		case cfg.MaxDepth > 0 && errors.Is(err, resilience.ErrSlotLineFull):
			slot.Release()
			e.opt.Observer.QueueRejected(p, conn.Label, resilience.CodeQueueFull)
			return admission{}, queueFull(p, cfg.MaxWait), true, false
		default:
			e.opt.Log.Warn("quota-share slot not available; proceeding without one", "provider", p, "connection_id", conn.ID)
			e.opt.Observer.FailOpen(p, conn.Label)
		}
		a.release = rel
	}
	return a, nil, false, false
}

// heartbeat writes ": queued" SSE comments to a streaming client while it waits. Writing the
// first one commits the response as an event stream, so later errors go out as error events.
// It is a re-arming timer, not a goroutine: a request that does not wait costs one timer.
type heartbeat struct {
	mu      sync.Mutex
	stopped bool
	timer   clockwork.Timer
}

func (e *Engine) heartbeats(c *call, w http.ResponseWriter) *heartbeat {
	return e.beat(w, c.stream, c.out, c.trace, ": queued\n\n")
}

// beat writes comment to a streaming client every heartbeatEvery until stopped; nothing for a
// client that did not ask for a stream.
func (e *Engine) beat(w http.ResponseWriter, stream bool, out *clientOut, tr *Trace, comment string) *heartbeat {
	h := &heartbeat{}
	if !stream {
		h.stopped = true
		return h
	}
	var beat func()
	beat = func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.stopped {
			return
		}
		out.commitStream(w, tr)
		_, _ = w.Write([]byte(comment))
		_ = http.NewResponseController(w).Flush()
		h.timer = e.opt.Clock.AfterFunc(heartbeatEvery, beat)
	}
	h.mu.Lock()
	h.timer = e.opt.Clock.AfterFunc(heartbeatEvery, beat)
	h.mu.Unlock()
	return h
}

// stop ends the heartbeats; once it returns none is being written.
func (h *heartbeat) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	if h.timer != nil {
		h.timer.Stop()
	}
}

// clientOut is what went to the client of one request so far; the calls a combo makes for one
// request share it.
type clientOut struct {
	// committed is set once the event-stream headers went out (a heartbeat while queued or
	// waiting, or the answer); from then on errors are written as stream error events.
	committed bool
	// delivered is set once an answer began to go to the client: from then on nothing is tried
	// again, on this target or another.
	delivered bool
}

// commitStream sends the event-stream headers once, with the route so far.
func (o *clientOut) commitStream(w http.ResponseWriter, tr *Trace) {
	if o.committed {
		return
	}
	o.committed = true
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if tr.Provider != "" {
		h.Set("X-Switchyard-Provider", tr.Provider)
	}
	h.Set(RouteHeader, tr.route())
	setDate(h)
	w.WriteHeader(http.StatusOK)
}

// writeStreamError ends a committed event stream with the error as an error event in the
// client's format.
func writeStreamError(w http.ResponseWriter, src Format, e *errs.Error) {
	switch src {
	case FormatMessages:
		_, _ = w.Write([]byte("event: error\ndata: " + string(AnthropicErrorBody(e)) + "\n\n"))
	case FormatResponses:
		body, _ := json.Marshal(map[string]any{"type": "error", "code": e.ReasonCode(), "message": e.Msg.String(), "param": nil,
			"sequence_number": 0})
		_, _ = w.Write([]byte("event: error\ndata: " + string(body) + "\n\n"))
	default:
		body, _ := json.Marshal(openAIError{Error: openAIErrorBody{Message: e.Msg.String(), Type: OpenAIType(e), Code: e.ReasonCode()}})
		_, _ = w.Write([]byte("data: " + string(body) + "\n\n"))
	}
	_ = http.NewResponseController(w).Flush()
}

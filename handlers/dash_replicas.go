package handlers

import (
	"context"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/replicas"
	"switchyard/views"
)

// ReplicaLister is what the Replicas panel reads (replicas.Registry). It answers from memory, so
// the overview's poll never waits on the database. A Mode other than replicas.ModeSingle means
// the store is shared with other replicas.
type ReplicaLister interface {
	List() []replicas.Replica
	Mode() string
	Live() int
}

// Replicas serves the overview's Replicas panel: the gateway processes sharing the database and
// how they enforce the concurrency caps.
type Replicas struct {
	// Registry is this replica's registry; nil shows no panel.
	Registry ReplicaLister
}

// Model is the panel's view model. It shows (Shared) when the store is shared or more than one
// replica runs on it.
func (h *Replicas) Model(ctx context.Context) views.ReplicasModel {
	var m views.ReplicasModel
	if h != nil && h.Registry != nil {
		list := h.Registry.List()
		m.Mode, m.Live = h.Registry.Mode(), h.Registry.Live()
		m.Shared = m.Mode != replicas.ModeSingle || len(list) > 1
		m.ModeText = capModeText(ctx, m.Mode, m.Live)
		for _, r := range list {
			m.Rows = append(m.Rows, views.ReplicaRow{ID: r.ID, Name: r.Name, Addr: r.Addr, Version: r.Version,
				Started: r.Started, HeartbeatAgeS: int64(r.HeartbeatAge.Seconds()), Live: r.Live, Self: r.Self})
		}
	}
	if !m.Shared {
		m = views.ReplicasModel{} // nothing of a hidden panel goes to the page
	}
	m.Version = stateVersion(m)
	return m
}

// capModeText says in words how the replicas enforce the concurrency caps of connections.
func capModeText(ctx context.Context, mode string, live int) string {
	switch mode {
	case replicas.ModeRedis:
		return i18n.T(ctx, "replicas.mode.redis")
	case replicas.ModeShare:
		return i18n.T(ctx, "replicas.mode.share", live)
	case replicas.ModeSingle:
		return i18n.T(ctx, "replicas.mode.single")
	}
	return mode
}

// Panel answers GET /overview/replicas, the panel's poll: the panel out of band, or 204 while it
// is still the version the page sent (?v=). The heartbeat ages are part of what it shows, so a
// shown panel changes at every poll; a hidden one does not.
func (h *Replicas) Panel(c echo.Context) error {
	m := h.Model(ctx(c))
	return renderPoll(c, m.Version, views.ReplicasState(m))
}

package handlers

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"switchyard/i18n"
	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/ops"
	"switchyard/services/proxy"
	"switchyard/views"
)

// fetchProblem frames why a model list could not be fetched: the kind and status in the
// reader's language, the upstream's own words apart.
func fetchProblem(ctx context.Context, reg *catalog.Registry, fe *proxy.FetchError) views.Problem {
	if fe == nil {
		return views.Problem{Text: i18n.T(ctx, "problem.fetch.unknown")}
	}
	p := views.Problem{Text: i18n.T(ctx, "problem.fetch."+fe.Kind)}
	switch fe.Kind {
	case "status":
		p.Text, p.Excerpt = i18n.T(ctx, "problem.fetch.status", fe.Status), fe.Excerpt
	case "redirect": // the excerpt is where it pointed
		p.Text, p.Excerpt = i18n.T(ctx, "problem.fetch.redirect", fe.Status), fe.Excerpt
	case "transport", "not_a_list":
		if fe.Err != nil {
			p.Excerpt = fe.Err.Error()
		}
	}
	p.Excerpt = strings.TrimSpace(ops.Redact(reg, p.Excerpt))
	return p
}

// msgProblem frames what the gateway told a client: the message in the reader's language, with
// the upstream's own words (an error body, a network error) split off as a verbatim excerpt.
func msgProblem(ctx context.Context, reg *catalog.Registry, m errs.Msg) views.Problem {
	if m.Key == "" {
		return views.Problem{}
	}
	var p views.Problem
	switch {
	case (m.Key == "proxy.upstream_message" || m.Key == "proxy.upstream_status") && len(m.Args) == 3:
		p.Text = i18n.T(ctx, "problem.upstream_status", m.Args[0], localArg(ctx, m.Args[1]))
		p.Excerpt = fmt.Sprint(m.Args[2])
	case m.Key == "proxy.unreachable" && len(m.Args) == 2:
		text := localArg(ctx, m.Args[1])
		if op, ok := m.Args[1].(errs.Msg); ok && op.Key == "proxy.transport_op" {
			text, p.Excerpt = i18n.T(ctx, "proxy.transport_failed"), English(op)
		}
		p.Text = i18n.T(ctx, "proxy.unreachable", m.Args[0], text)
	default:
		p.Text = Text(ctx, m)
	}
	p.Text, p.Excerpt = ops.Redact(reg, p.Text), strings.TrimSpace(ops.Redact(reg, p.Excerpt))
	return p
}

// stateVersion is a short fingerprint of the state a live poll shows; the poll sends it back
// and gets 204 while it is unchanged.
func stateVersion(parts ...any) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%+v", parts)
	return strconv.FormatUint(h.Sum64(), 36)
}

// providerTypes are the provider types for the forms, each with its label and whether any
// client request reaches it yet.
func providerTypes(ctx context.Context) []views.TypeOption {
	out := make([]views.TypeOption, len(catalog.ProviderTypes))
	for i, t := range catalog.ProviderTypes {
		out[i] = views.TypeOption{Value: t, Label: typeLabel(ctx, t), Served: len(proxy.ServedSurfaces(t)) > 0}
	}
	return out
}

func typeLabel(ctx context.Context, t string) string {
	key := "providers.type." + t
	if i18n.Has(i18n.FromContext(ctx), key) {
		return i18n.T(ctx, key)
	}
	return t
}

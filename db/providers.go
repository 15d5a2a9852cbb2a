package db

import (
	"context"
	"fmt"
)

// Provider is one row of providers.
type Provider struct {
	ID         int64  `db:"id"`
	Name       string `db:"name"`
	Type       string `db:"type"`
	BaseURL    string `db:"base_url"`
	Resilience string `db:"resilience"` // JSON of the per-provider overrides
	// ResponsesAPI says the upstream serves the Responses API itself (openai-compatible).
	ResponsesAPI bool `db:"responses_api"`
	// ListedModelsOnly refuses model names the provider's model list does not show (by default
	// they are forwarded and the upstream decides).
	ListedModelsOnly bool `db:"listed_models_only"`
	// Strategy orders the provider's connections (default priority).
	Strategy string `db:"strategy"`
	// UpstreamFormat is the wire format spoken upstream: chat (default) or responses.
	UpstreamFormat string `db:"upstream_format"`
	// ResponsesModels is the JSON array of model patterns an openai provider sends to
	// /v1/responses (default '[]').
	ResponsesModels string `db:"responses_models"`
	CreatedAt       int64  `db:"created_at"`
	UpdatedAt       int64  `db:"updated_at"`
}

const providerCols = `id, name, type, base_url, resilience, responses_api, listed_models_only, strategy, upstream_format,
	responses_models, created_at, updated_at`

// ListProviders returns every provider ordered by name.
func ListProviders(ctx context.Context, q Querier) ([]Provider, error) {
	return selectRows[Provider](ctx, q, "list providers",
		`SELECT `+providerCols+` FROM providers ORDER BY name`)
}

// GetProvider returns one provider by id.
func GetProvider(ctx context.Context, q Querier, id int64) (Provider, error) {
	return getRow[Provider](ctx, q, fmt.Sprintf("get provider %d", id),
		`SELECT `+providerCols+` FROM providers WHERE id = ?`, id)
}

// GetProviderByName returns one provider by its unique name.
func GetProviderByName(ctx context.Context, q Querier, name string) (Provider, error) {
	return getRow[Provider](ctx, q, fmt.Sprintf("get provider %q", name),
		`SELECT `+providerCols+` FROM providers WHERE name = ?`, name)
}

// InsertProvider creates a provider and sets its id and timestamps.
func InsertProvider(ctx context.Context, q Querier, p *Provider) error {
	if p.Resilience == "" {
		p.Resilience = "{}"
	}
	if p.Strategy == "" {
		p.Strategy = "priority"
	}
	defaultFormat(p)
	return insertStamped(ctx, q, &p.ID, &p.CreatedAt, &p.UpdatedAt, "insert provider",
		`INSERT INTO providers (name, type, base_url, resilience, responses_api, listed_models_only, strategy,
		upstream_format, responses_models, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, p.Name, p.Type,
		p.BaseURL, p.Resilience, p.ResponsesAPI, p.ListedModelsOnly, p.Strategy, p.UpstreamFormat, p.ResponsesModels)
}

// UpdateProvider writes every mutable column of p.
func UpdateProvider(ctx context.Context, q Querier, p *Provider) error {
	p.UpdatedAt = nowMS()
	defaultFormat(p)
	return execOne(ctx, q, fmt.Sprintf("update provider %d", p.ID), "provider",
		`UPDATE providers SET name = ?, type = ?, base_url = ?, resilience = ?, responses_api = ?,
		listed_models_only = ?, strategy = ?, upstream_format = ?, responses_models = ?, updated_at = ? WHERE id = ?`, p.Name, p.Type,
		p.BaseURL, p.Resilience, p.ResponsesAPI, p.ListedModelsOnly, p.Strategy, p.UpstreamFormat, p.ResponsesModels, p.UpdatedAt, p.ID)
}

// defaultFormat fills the format columns a caller left empty with the columns' defaults.
func defaultFormat(p *Provider) {
	if p.UpstreamFormat == "" {
		p.UpstreamFormat = "chat"
	}
	if p.ResponsesModels == "" {
		p.ResponsesModels = "[]"
	}
}

// DeleteProvider removes a provider and, by cascade, its connections.
func DeleteProvider(ctx context.Context, q Querier, id int64) error {
	return execOne(ctx, q, fmt.Sprintf("delete provider %d", id), "provider",
		`DELETE FROM providers WHERE id = ?`, id)
}

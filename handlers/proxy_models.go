package handlers

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/proxy"
	"switchyard/services/routing"
)

type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// wantsAnthropic reports whether the caller speaks Anthropic's API (its SDKs send
// anthropic-version on every request).
func wantsAnthropic(c echo.Context) bool { return c.Request().Header.Get("anthropic-version") != "" }

func openAIModelOf(m proxy.Model) openAIModel {
	return openAIModel{ID: m.ID, Object: "model", Created: m.Created, OwnedBy: m.Provider}
}

func anthropicModelOf(m proxy.Model) anthropicModel {
	return anthropicModel{Type: "model", ID: m.ID, DisplayName: m.Name, CreatedAt: time.Unix(m.Created, 0).UTC().Format(time.RFC3339)}
}

// comboOwner is the owned_by of a combo in the model list: the gateway itself serves it.
const comboOwner = "switchyard"

// comboModel is a combo as an entry of the model list: its name is the id (and the display name).
func comboModel(c *routing.Combo) proxy.Model {
	return proxy.Model{ID: c.Name, Provider: comboOwner, Name: c.Name, Created: c.CreatedAt / 1000}
}

// models is every model a client can name in the list: the providers' models, then the combos.
func (p *Proxy) models() []proxy.Model {
	list := p.Inventory.List()
	if p.Combos != nil {
		for _, c := range p.Combos().Combos() {
			list = append(list, comboModel(c))
		}
	}
	return list
}

// Models answers GET /v1/models with the union of every provider's models as provider/model and
// every combo by its name, in OpenAI's shape, or in Anthropic's when the request carries
// anthropic-version; a key with allowed_models sees only the models and combos it may address.
func (p *Proxy) Models(c echo.Context) error {
	list := p.models()
	if a := clientKeyOf(c).Access; a.RestrictsModels() { // only what the key may address
		list = p.Engine.ListAllowed(a, list)
	}
	if wantsAnthropic(c) {
		data := make([]anthropicModel, len(list))
		for i, m := range list {
			data[i] = anthropicModelOf(m)
		}
		page := map[string]any{"data": data, "has_more": false, "first_id": nil, "last_id": nil}
		if len(data) > 0 {
			page["first_id"], page["last_id"] = data[0].ID, data[len(data)-1].ID
		}
		return c.JSON(http.StatusOK, page)
	}
	data := make([]openAIModel, len(list))
	for i, m := range list {
		data[i] = openAIModelOf(m)
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": data})
}

// Model answers GET /v1/models/{id} for every id routing accepts: a combo's name (first, as
// routing resolves it), provider/model (the id may contain slashes) or a bare model name one
// provider serves; 403 model_not_allowed for a model outside the key's allowed_models.
func (p *Proxy) Model(c echo.Context) error {
	id := strings.TrimPrefix(c.Param("*"), "/")
	if u, err := url.PathUnescape(id); err == nil { // SDKs escape the slash of provider/model
		id = u
	}
	if a := clientKeyOf(c).Access; a.RestrictsModels() {
		if err := p.Engine.CheckModel(a, id); err != nil {
			return err
		}
	}
	var m proxy.Model
	if combo, ok := p.combo(id); ok {
		m = comboModel(combo)
	} else {
		var err *errs.Error // not error: a nil *errs.Error in an error is not nil
		if m, err = p.Engine.Model(c.Request().Context(), id); err != nil {
			return err
		}
	}
	if wantsAnthropic(c) {
		return c.JSON(http.StatusOK, anthropicModelOf(m))
	}
	return c.JSON(http.StatusOK, openAIModelOf(m))
}

// combo returns the combo named id, if there is one.
func (p *Proxy) combo(id string) (*routing.Combo, bool) {
	if p.Combos == nil {
		return nil, false
	}
	return p.Combos().Combo(id)
}

package handlers

import (
	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
)

// SaveCard answers POST /settings/:card: the card named by the path saves its settings.
func (s *Settings) SaveCard(c echo.Context) error {
	for _, card := range settingsCards {
		if card.id == c.Param("card") {
			return s.saveCard(card)(c)
		}
	}
	return errs.New(errs.NotFound, "err.not_found")
}

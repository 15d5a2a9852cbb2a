package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
)

// The admin API's collections (providers, connections, combos, keys) answer the same five
// requests the same way; these serve them, with the service call as the only difference.

// listJSON answers GET on a collection: {"items": [...]}.
func listJSON[T any](c echo.Context, list func(context.Context) ([]T, error)) error {
	items, err := list(ctx(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, Items(items))
}

// getJSON answers GET on the item the path's :id names.
func getJSON[T any](c echo.Context, get func(context.Context, int64) (T, error)) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	item, err := get(ctx(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, item)
}

// createJSON answers POST on a collection: the body bound strictly, the created item (201).
func createJSON[In, T any](c echo.Context, create func(context.Context, In) (T, error)) error {
	var in In
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	item, err := create(ctx(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, item)
}

// updateJSON answers PATCH on the item the path's :id names with the body bound strictly.
func updateJSON[In, T any](c echo.Context, update func(context.Context, int64, In) (T, error)) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	var in In
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	item, err := update(ctx(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, item)
}

// deleteByID answers DELETE on the item the path's :id names (204).
func deleteByID(c echo.Context, del func(context.Context, int64) error) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	if err := del(ctx(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

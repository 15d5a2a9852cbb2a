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

// getJSON answers with what get finds for the path's :id (200): the item it names, or what a
// call on it gave.
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
	return bodyJSON(c, http.StatusCreated, create)
}

// bodyJSON answers a request whose JSON body, bound strictly, is all call needs: its answer
// with status.
func bodyJSON[In, T any](c echo.Context, status int, call func(context.Context, In) (T, error)) error {
	var in In
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	out, err := call(ctx(c), in)
	if err != nil {
		return err
	}
	return c.JSON(status, out)
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

// checkedBy binds a catalog create to the validator it checks override documents with.
func checkedBy[In, V, T any](create func(context.Context, In, V) (T, error), v V) func(context.Context, In) (T, error) {
	return func(cx context.Context, in In) (T, error) { return create(cx, in, v) }
}

// checkedByID binds a catalog update to the validator it checks override documents with.
func checkedByID[In, V, T any](update func(context.Context, int64, In, V) (T, error), v V) func(context.Context, int64, In) (T, error) {
	return func(cx context.Context, id int64, in In) (T, error) { return update(cx, id, in, v) }
}

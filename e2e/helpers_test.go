package e2e

import (
	"errors"
	"strconv"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

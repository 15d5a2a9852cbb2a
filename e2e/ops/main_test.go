// Package ops holds the end-to-end tests of the gateway as an operated process: the real binary
// killed and restarted, its store, several replicas, and the operator's sign-in, sessions and
// admin API. They boot the whole app like the tests of package e2e, in a package of their own so
// the two run side by side.
package ops

import (
	"strconv"
	"testing"

	"switchyard/e2e/testenv"
)

func TestMain(m *testing.M) { testenv.RunCheckingLeaks(m) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

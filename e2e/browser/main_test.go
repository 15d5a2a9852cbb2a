package browser

import (
	"testing"

	"switchyard/e2e/testenv"
)

func TestMain(m *testing.M) { testenv.RunCheckingLeaks(m) }

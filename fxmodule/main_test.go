package outboxfx_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine outlives the tests: every Client
// must have stopped all of its goroutines, every pool must be closed. No
// goroutine needs to be ignored: goleak already skips the runtime's and
// os/signal's own, and fx stops its signal relayer on Stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

package outboxbun_test

import (
	"testing"

	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"go.uber.org/goleak"
)

// TestMain fails the test binary if a goroutine outlives the tests, once
// the server pools the tests share are closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(outboxsqltest.ClosingServers(m))
}

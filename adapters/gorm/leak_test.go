package outboxgorm_test

import (
	"testing"

	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"go.uber.org/goleak"
)

// TestMain fails the test binary if a goroutine outlives the tests, once
// the server pools the tests share are closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(outboxsqltest.ClosingServers(m),
		// GORM's prepared-statement cache (gorm.Config{PrepareStmt: true})
		// expires entries in a goroutine that GORM never stops, even when
		// the *sql.DB is closed (see gorm.io/gorm/internal/lru.NewLRU).
		goleak.IgnoreTopFunction("gorm.io/gorm/internal/lru.NewLRU[...].func1"),
	)
}

package outboxgorm_test

import (
	"testing"

	"go.uber.org/goleak"
)

// leakOptions ignores the goroutines that outlive the tests by design and
// that nothing in this module can stop.
var leakOptions = []goleak.Option{
	// outboxsqltest shares one *sql.DB per database server among all the
	// tests of the binary and never closes it: its pool goroutine stays.
	goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
	// go-sql-driver/mysql watches every open connection for context
	// cancellation; the idle connections of that shared pool keep theirs.
	goleak.IgnoreTopFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"),
	// GORM's prepared-statement cache (gorm.Config{PrepareStmt: true})
	// expires entries in a goroutine that GORM never stops, even when the
	// *sql.DB is closed (see gorm.io/gorm/internal/lru.NewLRU).
	goleak.IgnoreTopFunction("gorm.io/gorm/internal/lru.NewLRU[...].func1"),
}

// TestMain fails the test binary if any other goroutine outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakOptions...)
}

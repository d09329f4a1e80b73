package outbox

import (
	"context"
	"log/slog"
	"runtime/debug"
)

// Tx is a running business transaction as the outbox sees it: how to be
// told when it ends. The connection to write through is the Store's
// business: a Store reaches it through the concrete type its TxContext
// returns (package outboxsql for database/sql and the ORM adapters,
// outboxpgx for pgx), so the interface is bound to no database API.
type Tx interface {
	// AfterCommit registers fn to run once, after the outermost transaction
	// really commits (not when a savepoint is released), unless the
	// savepoint open at registration is rolled back first. Panics in fn are
	// recovered and logged.
	AfterCommit(fn func())
	// AfterRollback registers fn to run once, when the work registered with
	// it is rolled back: the whole transaction, or the savepoint open at
	// registration.
	AfterRollback(fn func())
}

// TxContext finds the transaction carried by a context, the way a Java
// framework would use a thread-local. Package outboxsql implements it for
// *sql.DB; the adapters for GORM, bun, sqlx and pgx implement it for theirs.
type TxContext interface {
	// Current returns the transaction active in ctx. With none, or with one
	// that has already ended, it returns an error wrapping ErrNoTransaction.
	Current(ctx context.Context) (Tx, error)
}

// safeCall runs fn, logging instead of propagating a panic.
func safeCall(logger *slog.Logger, what string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			loggerOr(logger).Error("outbox: "+what+" panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	fn()
}

func loggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

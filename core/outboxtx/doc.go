// Package outboxtx is the transaction bookkeeping shared by TxContext
// implementations: adapters for ORMs and drivers observe a database
// transaction (its savepoints, its commit or rollback) and report what they
// see to a [Scope], which runs the outbox's after-commit and after-rollback
// callbacks at the right moment.
//
// A Scope is one database transaction. Callbacks registered on it run once,
// after the outermost transaction really commits — releasing a savepoint
// commits nothing. Callbacks registered after a savepoint that is rolled
// back never see a commit: their after-rollback functions run at the
// ROLLBACK TO, because the rows they describe are gone even if the outer
// transaction commits later. This keeps the hot path from delivering an
// event whose row was rolled back with its savepoint.
//
// Adapters that see the SQL of a transaction (a GORM connection pool, a bun
// query hook, a database/sql driver wrapper) pass every statement that
// succeeded to [Scope.Observe], which recognizes SAVEPOINT, RELEASE [SAVEPOINT]
// and ROLLBACK [WORK|TRANSACTION] TO [SAVEPOINT] in any letter case; adapters
// that manage savepoints themselves call [Scope.Savepoint], [Scope.Release] and
// [Scope.RollbackTo] directly. The package depends on the standard library
// only.
package outboxtx

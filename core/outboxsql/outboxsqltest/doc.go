// Package outboxsqltest lists the databases that tests of outboxsql-based
// code run on — the integration suites and every ORM adapter — so that a
// new database or driver is one entry here, not one per test module.
//
// The package imports no driver: a test binary registers the drivers of the
// backends it runs by importing them (for example _ "modernc.org/sqlite").
// Server backends read their DSN from an environment variable (with a local
// default); a server that cannot be reached skips the test loudly, or fails
// it when OUTBOX_TEST_REQUIRE_DBS=1, as CI sets it.
//
// Beyond the list, it holds what those tests share: one pool per server for
// the whole test binary ([Backend.Open], or [Shared] for a pool an
// adapter opens its own way), closed by [CloseServers] so that a leak check
// in TestMain passes ([ClosingServers]), a fresh outbox table per test
// ([Backend.NewStore], or [Backend.OpenWith] through an adapter's Open), a
// database whose driver outboxsql does not know ([UnknownDB]) and a
// statement that makes a commit fail ([Backend.CommitFailure]).
package outboxsqltest

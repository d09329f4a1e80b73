// Package bench holds the outbox benchmarks: Benchmark functions for the hot
// in-process pieces that need a real store (dispatcher handoff, header
// codec through the SQLite store), and, in cmd/outbox-bench, the program
// that measures every framework scenario next to its raw-SQL baseline on
// the same database, driver and concurrency.
package bench

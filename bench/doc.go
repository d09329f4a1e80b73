// Package bench holds the outbox benchmarks: Benchmark functions for the
// in-process paths that need a real store (the hot path from commit to
// listener, the header codec through the SQLite store), and, in
// cmd/outbox-bench, the program that measures every framework scenario next
// to its raw-SQL baseline on the same database, driver and concurrency.
package bench

// Package idempotency is the API side of the outbox: idempotency keys that
// make a command — a POST that places an order, a payment — take effect
// once, however often a client sends it.
//
// A client that did not get an answer cannot tell a lost request from a
// lost response, so it sends the request again with the same
// Idempotency-Key header. The command's first run records the key, a
// fingerprint of the request and the response, in the command's own
// transaction: the business rows, the outbox events written with
// [outbox.Client.Write] and the key's record commit or roll back together.
// A retry finds the record and gets the recorded response back without
// running the command again. With the outbox at the producer and package
// inbox at the consumer, that makes the whole path exactly-once in effect.
//
// The records are kept on PostgreSQL, MySQL/MariaDB or SQLite ([SQLStore]),
// reached through database/sql (outboxsql) or an adapter (GORM, bun, sqlx,
// pgx); the package depends on the standard library only.
//
// # Quick start
//
// With database/sql and the transactions of outboxsql.TxManager (with an
// adapter, pass its Store, TxContext and InTx instead):
//
//	store, _ := outboxsql.Open(db) // the database: pool and dialect
//	txm := outboxsql.NewTxManager(db)
//	keys, _ := idempotency.NewSQLStore(store, "") // table outbox_idempotency
//	_ = keys.Migrate(ctx)
//	guard, _ := idempotency.New(idempotency.Config{Store: keys, TxContext: txm})
//	mw, _ := idempotency.Middleware(idempotency.MiddlewareConfig{Guard: guard, InTx: txm.InTx,
//		Caller: authenticatedUser}) // func(*http.Request) (string, error): keys are per caller
//	mux.Handle("POST /orders", mw(http.HandlerFunc(placeOrder)))
//
//	func placeOrder(w http.ResponseWriter, r *http.Request) {
//		tx, _ := txm.Tx(r.Context()) // the Middleware's transaction
//		_, err := tx.ExecContext(r.Context(), "INSERT INTO orders (id) VALUES (?)", id)
//		// … client.Write(r.Context(), orderPlaced) in the same transaction
//		w.WriteHeader(http.StatusCreated) // recorded, replayed to every retry
//	}
//
// Without HTTP, [Guard.Do] does the same for any command: inside the
// caller's transaction it records the key, runs the command and records
// its [Response].
//
// # Answers
//
// Keys are kept per caller ([MiddlewareConfig.Caller], the authenticated
// principal): another caller's request with the same key is another
// command, and learns nothing of the first. A retry with the same key and
// the same request gets the recorded response with the header
// Idempotent-Replayed: true. The same key with a different
// request (another fingerprint) is [ErrMismatch], 422. The same key while the
// first request still runs waits for it, up to [Config.Wait], then replays its
// response, or is [ErrInFlight], 409: the command never runs twice at once,
// because the key's row is inserted before the command runs and the database's
// unique key makes the second transaction wait. Responses with a
// [Recordable] status (2xx, 3xx, 4xx but 408, 425 and 429) are recorded;
// the others are not ([ErrNotRecorded]): their transaction rolls back and
// the key can be retried. A body over [Config.MaxResponseBody] (default 1
// MiB) reaches the first request but is recorded without, marked by
// [OmittedHeader].
//
// # Retention
//
// Records are kept until they are purged: [Guard.Purge] deletes those
// older than an age, and [Guard.Purger] hands them to the outbox's
// PurgeScheduler. A retry with a purged key runs the command again, so
// keep records longer than clients retry (a day is common).
package idempotency

package idempotency_test

import (
	"context"
	"database/sql"
	"log"
	"net/http"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/idempotency"
	"github.com/go-outbox/outbox/core/outboxsql"
)

// An HTTP service whose POST /orders runs once per Idempotency-Key: the
// order, its outbox event and the key's record commit in one transaction.
// (Runnable on SQLite: the Example of the integration module.)
func ExampleMiddleware() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", outboxsql.SQLiteDSN("orders.db")) // import _ "modernc.org/sqlite"
	if err != nil {
		log.Fatal(err)
	}
	store, err := outboxsql.Open(db)
	if err != nil {
		log.Fatal(err)
	}
	txm := outboxsql.NewTxManager(db)
	client, err := outbox.New(outbox.Config{Store: store, TxContext: txm})
	if err != nil {
		log.Fatal(err)
	}
	keys, err := idempotency.NewSQLStore(store, "")
	if err != nil {
		log.Fatal(err)
	}
	if err := keys.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	guard, err := idempotency.New(idempotency.Config{Store: keys, TxContext: txm})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idempotency.Middleware(idempotency.MiddlewareConfig{
		Guard: guard,
		InTx:  txm.InTx,
		// The principal the authentication in front established (here a
		// header that an authenticating proxy sets and clients cannot).
		Caller: func(r *http.Request) (string, error) { return r.Header.Get("X-Authenticated-User"), nil },
	})
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("POST /orders", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		tx, _ := txm.Tx(ctx) // the Middleware's transaction
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (?)", "o-1"); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable) // rolled back, not recorded
			return
		}
		ev, _ := outbox.NewEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{"id":"o-1"}`)))
		if _, err := client.Write(ctx, ev); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Location", "/orders/o-1")
		w.WriteHeader(http.StatusCreated) // recorded: every retry gets this 201
	})))
}

// A command without HTTP: Do records the key and the response in the
// caller's transaction.
func ExampleGuard_Do() {
	ctx := context.Background()
	var (
		txm   *outboxsql.TxManager // outboxsql.NewTxManager(db)
		guard *idempotency.Guard   // idempotency.New(…)
	)
	var out idempotency.Outcome
	err := txm.InTx(ctx, func(ctx context.Context) error {
		var err error
		out, err = guard.Do(ctx, "payments", "pay-7f3a", idempotency.Fingerprint("POST", "/payments", []byte(`{"amount":100}`)),
			func(ctx context.Context) (idempotency.Response, error) {
				tx, _ := txm.Tx(ctx)
				if _, err := tx.ExecContext(ctx, "INSERT INTO payments (amount) VALUES (?)", 100); err != nil {
					return idempotency.Response{}, err
				}
				return idempotency.Response{Status: http.StatusCreated, Body: []byte(`{"paid":100}`)}, nil
			})
		return err // ErrMismatch, ErrInFlight: nothing ran; roll back
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("status %d, replayed %v", out.Response.Status, out.Replayed)
}

// The outbox's PurgeScheduler forgets the keys after a day.
func ExampleGuard_Purger() {
	ctx := context.Background()
	var guard *idempotency.Guard // idempotency.New(…)
	purger, err := outbox.NewPurgeScheduler(outbox.PurgeConfig{
		Purger:    guard.Purger(),
		Retention: 24 * time.Hour, // longer than clients retry
		Interval:  time.Hour,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := purger.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = purger.Close(ctx) }()
}

package integration_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/idempotency"
	"github.com/go-outbox/outbox/core/outboxsql"
)

// An order service behind the idempotency Middleware: a POST with an
// Idempotency-Key writes the order, its OrderPlaced event (outbox) and the
// key's record in one transaction; a retry gets the recorded response and
// writes nothing; the key with another body is refused.
func Example_idempotency() {
	db, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	if _, err := db.Exec("CREATE TABLE orders (id TEXT PRIMARY KEY, item TEXT NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	store, err := outboxsql.Open(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	txm := outboxsql.NewTxManager(db)
	client, err := outbox.New(outbox.Config{Store: store, TxContext: txm, Mode: outbox.ModeWriterOnly})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	// The API layer: idempotency keys in the same database.
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
	mw, err := idempotency.Middleware(idempotency.MiddlewareConfig{Guard: guard, InTx: txm.InTx,
		// Keys are kept per caller: the principal the service's
		// authentication established (here, for the example, one user).
		Caller: func(*http.Request) (string, error) { return "user-7", nil }})
	if err != nil {
		log.Fatal(err)
	}

	placeOrder := func(w http.ResponseWriter, r *http.Request) {
		item, _ := io.ReadAll(r.Body)
		ctx := r.Context() // carries the Middleware's transaction
		tx, _ := txm.Tx(ctx)
		id := "o-" + outbox.NewULID()[20:]
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, item) VALUES (?, ?)", id, string(item)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // 5xx: rolled back, not recorded
			return
		}
		ev, _ := outbox.NewEnvelope(outbox.EventName("OrderPlaced"), outbox.WithAggregate(outbox.AggregateName("Order"), id),
			outbox.WithJSON([]byte(fmt.Sprintf(`{"item":%q}`, item))))
		if _, err := client.Write(ctx, ev); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"item":%q}`, item)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", mw(http.HandlerFunc(placeOrder)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(key, item string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(item))
		req.Header.Set("Idempotency-Key", key)
		resp, err := srv.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d replayed=%q %s\n", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), strings.TrimSpace(string(body)))
	}
	post("4b1d-01", "book") // the first request
	post("4b1d-01", "book") // the client's retry
	post("4b1d-01", "pen")  // the key reused for another request

	var orders int
	if err := db.QueryRow("SELECT COUNT(*) FROM orders").Scan(&orders); err != nil {
		log.Fatal(err)
	}
	events, err := store.Count(ctx, outbox.Query{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", orders, "events:", events)
	// Output:
	// 201 replayed="" {"item":"book"}
	// 201 replayed="true" {"item":"book"}
	// 422 replayed="" the Idempotency-Key was used for a different request
	// orders: 1 events: 1
}

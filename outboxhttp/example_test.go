package outboxhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	"github.com/go-outbox/outbox/outboxhttp"
)

// The admin handler mounted under /admin/outbox/ of a net/http server,
// with an authorizer that asks for a token: reading needs none, a replay
// does. The store is the in-memory one here; in production it is the
// outboxsql (or an adapter's) Store the Client was built with.
func ExampleNew() {
	ctx := context.Background()
	store := outboxmem.New()
	client, err := outbox.New(outbox.Config{Store: store, TxContext: store, Mode: outbox.ModeWriterOnly})
	if err != nil {
		panic(err)
	}
	defer client.Close(ctx)
	id := deadEvent(ctx, client, store) // an event whose listener gave up

	admin, err := outboxhttp.New(outboxhttp.Config{
		Sources: []outboxhttp.Source{{Name: "orders", Client: client, Events: store}},
		Authorize: func(r *http.Request) error {
			if r.Header.Get("X-Admin-Token") != "s3cret" { // your session and roles here
				return errors.New("admins only")
			}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/outbox/", http.StripPrefix("/admin/outbox", admin))
	srv := httptest.NewServer(mux) // http.ListenAndServe(addr, mux) in a real server
	defer srv.Close()

	call := func(method, path, token string) {
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("X-Admin-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		switch {
		case body["counts"] != nil:
			fmt.Println(resp.StatusCode, "counts:", body["counts"])
		case body["error"] != nil:
			fmt.Println(resp.StatusCode, body["code"], body["error"])
		default:
			fmt.Println(resp.StatusCode, "replayed:", body["replayed"])
		}
	}
	call("GET", "/admin/outbox/api/orders/stats", "")
	call("POST", "/admin/outbox/api/orders/dead/"+id+"/replay", "")
	call("POST", "/admin/outbox/api/orders/dead/"+id+"/replay", "s3cret")
	call("GET", "/admin/outbox/api/orders/stats", "")
	// Output:
	// 200 counts: map[DEAD:1 DONE:0 NEW:0 RETRY:0]
	// 403 forbidden not authorized: admins only
	// 200 replayed: 1
	// 200 counts: map[DEAD:0 DONE:0 NEW:1 RETRY:0]
}

// deadEvent writes an event and moves it to DEAD, as a dispatcher does
// after its last failed attempt, and returns its id.
func deadEvent(ctx context.Context, client *outbox.Client, store *outboxmem.Store) string {
	var ids []string
	err := store.InTx(ctx, func(ctx context.Context) error {
		var err error
		ids, err = client.Write(ctx, outbox.MustEnvelope(outbox.EventName("InvoiceSent"), outbox.WithJSON([]byte(`{"invoice":"inv-1"}`))))
		return err
	})
	if err != nil {
		panic(err)
	}
	now := time.Now()
	if _, err := store.Claim(ctx, outbox.ClaimRequest{Owner: "worker", Now: now, Lease: time.Minute, Limit: 1}); err != nil {
		panic(err)
	}
	if _, err := store.MarkDead(ctx, outbox.Outcome{Owner: "worker", ID: ids[0], At: now, Error: "smtp 550: mailbox unavailable"}); err != nil {
		panic(err)
	}
	return ids[0]
}

package outboxprom_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxmem"
	outboxprom "github.com/go-outbox/outbox/metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// One Client's metrics on an application's registry, served by promhttp.
func ExampleNew() {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	metrics, err := outboxprom.New(outboxprom.Options{Registerer: reg, DataSource: "orders"})
	if err != nil {
		panic(err)
	}
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	store := outboxmem.New() // outboxsql.Open(db) in a real application
	client, err := outbox.New(outbox.Config{Store: store, TxContext: store, Metrics: metrics, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	_ = client.Handle(outbox.EventName("OrderPlaced"), func(context.Context, outbox.Envelope) error { return nil })
	_ = client.Start(ctx)
	defer client.Close(ctx)
	_ = store.InTx(ctx, func(ctx context.Context) error {
		_, err := client.Write(ctx, outbox.MustEnvelope(outbox.EventName("OrderPlaced"), outbox.WithJSON([]byte(`{}`))))
		return err
	})
	// What a scrape of /metrics would read, once the event is delivered.
	for range 1000 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if m := mf.GetMetric(); mf.GetName() == "outbox_delivered_total" && m[0].GetCounter().GetValue() == 1 {
				fmt.Println(mf.GetName(), m[0].GetLabel()[0].GetValue(), m[0].GetLabel()[1].GetValue(), m[0].GetCounter().GetValue())
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Output: outbox_delivered_total orders OrderPlaced 1
}

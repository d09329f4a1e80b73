package outboxfx_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"github.com/go-outbox/outbox/outboxhttp"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
)

// Probes provides the probes of a data source's Client: live and ready
// while the app runs, not live once it stopped.
func TestProbes(t *testing.T) {
	var probes *outboxhttp.Probes
	app := fxtest.New(t,
		fx.NopLogger,
		fx.Supply(slog.New(slog.DiscardHandler)),
		outboxfx.SQLDB("orders", "sqlite", outboxsql.SQLiteDSN(filepath.Join(t.TempDir(), "orders.db"))),
		outboxfx.DataSource("orders", outboxfx.Configure(func(c *outboxfx.Config) { c.Migrate = true })),
		outboxfx.Listen("orders", nil, outbox.EventName("OrderPlaced"), outbox.ListenerFunc(func(context.Context, outbox.Envelope) error { return nil })),
		outboxfx.Probes("orders", outboxhttp.ReadyConfig{MaxDead: 10, MaxOldestPending: time.Hour}),
		fx.Populate(fx.Annotate(&probes, fx.ParamTags(outboxfx.NameTag("orders")))),
	)
	status := func(h http.Handler) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		return w.Code
	}
	app.RequireStart()
	if live, ready := status(probes.Liveness()), status(probes.Readiness()); live != 200 || ready != 200 {
		t.Errorf("while the app runs: liveness %d, readiness %d; want 200, 200", live, ready)
	}
	app.RequireStop()
	if live := status(probes.Liveness()); live != 503 {
		t.Errorf("after the app stopped: liveness %d, want 503", live)
	}
}

// An invalid ReadyConfig fails the app's start.
func TestProbesInvalidConfig(t *testing.T) {
	app := fx.New(fx.NopLogger, outboxfx.Probes("", outboxhttp.ReadyConfig{MaxDead: -1}))
	if err := app.Err(); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("app error %v, want ErrInvalidConfig", err)
	}
}

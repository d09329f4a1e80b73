package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	outboxotel "github.com/go-outbox/outbox/otel"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/rs/zerolog"
	"go.uber.org/fx"
	"gorm.io/gorm"
	_ "modernc.org/sqlite"
)

// settings are the command line's choices.
type settings struct {
	dsn          string
	failListener bool
	// adminToken allows replay and delete on the admin page; empty:
	// read-only.
	adminToken string
	// traces receives the spans as JSON lines (the OpenTelemetry stdout
	// exporter), indented with prettyTraces; nil: no tracing.
	traces       io.Writer
	prettyTraces bool
}

// zerologFx routes fx's event log to logger: its wiring too at debug level.
func zerologFx(logger zerolog.Logger) fx.Option {
	if logger.GetLevel() <= zerolog.DebugLevel {
		return outboxfx.WithZerologVerbose()
	}
	return outboxfx.WithZerolog()
}

// appOptions is the whole application except the listening server: the
// outbox's default data source on the -dsn database, GORM on the same pool
// with the outboxgorm plugin (whose TxContext the data source uses), the
// orders service, the shipping listener, the outbox's admin handler,
// metrics and traces (Observability) and the HTTP handler. Tests serve the
// handler with httptest instead.
func appOptions(s settings, logger zerolog.Logger) fx.Option {
	obs, err := newObservability(s.traces, s.prettyTraces)
	if err != nil {
		return fx.Error(fmt.Errorf("http-demo: observability: %w", err))
	}
	return fx.Options(
		fx.Supply(logger, obs),
		obs.lifecycle(),
		zerologFx(logger),
		outboxfx.ZerologLogger(), // the outbox logs to the zerolog.Logger too
		outboxfx.SQLDBFromURL(outboxfx.DefaultName, s.dsn),
		// GORM on that pool, with the outboxgorm plugin: the *gorm.DB for
		// the orders and the shipping listener, and the outbox.TxContext
		// through which the Client finds GORM's transactions.
		fx.Provide(newGormDB(s.dsn)),
		outboxfx.Module(
			outboxfx.WithTxContext(), // the outboxgorm TxContext above, no TxManager
			outboxfx.WithMetrics(obs.metrics),
			// The writer's hook puts the request's trace context into the
			// events' headers; the interceptor continues it in the delivery.
			outboxfx.WithHooks(outboxotel.WriterHook(obs.tracing)),
			outboxfx.WithInterceptors(outboxotel.Interceptor(obs.tracing)),
			outboxfx.WithPreset(outboxfx.PresetSingleNode),
			outboxfx.Configure(func(c *outboxfx.Config) {
				c.Migrate = true
				c.Table = "http_demo_outbox" // its own table, should the database be shared
				c.MaxAttempts = 3            // a broken listener reaches DEAD within a second
				c.RetryBase, c.RetryMax = 100*time.Millisecond, 500*time.Millisecond
				c.PollInterval = 250 * time.Millisecond
			}),
			outboxfx.FromEnv(), // OUTBOX_… variables have the last word
		),
		fx.Provide(
			func(db *gorm.DB) *Shipping { return newShipping(db, s.failListener) },
			newOrders,
			func(c *outbox.Client, store *outboxsql.Store, log zerolog.Logger) (*Admin, error) {
				return newAdmin(s, c, store, log)
			},
			newAPI,
		),
		outboxfx.Routes(outboxfx.DefaultName, (*Shipping).Route),
	)
}

// serve runs an http.Server for the API on addr. It listens in OnStart (so
// a busy port fails the start), serves in a goroutine, and shuts down
// gracefully in OnStop, before the outbox stops.
func serve(addr string) fx.Option {
	return fx.Invoke(func(lc fx.Lifecycle, api *API, log zerolog.Logger) {
		srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 5 * time.Second}
		done := make(chan struct{})
		lc.Append(fx.Hook{
			OnStart: func(ctx context.Context) error {
				ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
				if err != nil {
					return fmt.Errorf("http-demo: listen on %s: %w", addr, err)
				}
				go func() {
					defer close(done)
					if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
						log.Error().Err(err).Msg("http server failed")
					}
				}()
				api.ready.Store(true)
				log.Info().Str("addr", ln.Addr().String()).Str("admin", "http://"+ln.Addr().String()+"/admin/").
					Bool("admin_read_only", api.admin.authorize == nil).Msg("http-demo listening")
				return nil
			},
			OnStop: func(ctx context.Context) error {
				api.ready.Store(false)
				err := srv.Shutdown(ctx)
				select {
				case <-done:
				case <-ctx.Done():
				}
				return err
			},
		})
	})
}

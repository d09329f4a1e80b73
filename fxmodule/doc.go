// Package outboxfx wires the transactional outbox into an uber-go/fx
// application, for one data source or several.
//
// Each data source gets its own outboxsql.Store (on its own table and
// database) and exactly one *outbox.Client, built with outbox.New from the
// data source's Config, started in fx's OnStart and closed in OnStop.
// Module wires the default data source, whose values carry no name tag;
// DataSource wires a named one, whose values carry `name:"<data source>"`
// so that application code injects the right Client:
//
//	fx.New(
//		fx.Supply(logger), // a *slog.Logger; optional
//		outboxfx.SQLDB("orders", "sqlite", outboxsql.SQLiteDSN("orders.db")),
//		outboxfx.DataSource("orders", outboxfx.WithPreset(outboxfx.PresetSingleNode), outboxfx.FromEnv()),
//		outboxfx.Routes("orders", newShippingRoute),
//		fx.Invoke(fx.Annotate(func(c *outbox.Client, tx *outboxsql.TxManager) { ... },
//			fx.ParamTags(`name:"orders"`, `name:"orders"`))),
//	)
//
// # Listeners
//
// Listeners are contributed as Route values to the data source's value group
// (RouteGroup: "outbox_routes" for the default data source,
// "outbox_routes_orders" for "orders"), with Routes, Listen or Subscribe,
// and are registered on the data source's Client: a route without an
// aggregate type with Client.Handle (the event type on any aggregate), one
// with an aggregate type with Client.Register, one with a Subscriber with
// Client.Subscribe. A data source without routes still
// starts: it logs a warning, and every event it claims is left pending as
// unroutable, offered again after UnroutedRetry (DEAD at once if that is
// negative). Two
// routes for the same event type (on any aggregate, or on the same
// aggregate type) make the app fail to start.
//
// # Configuration
//
// Config embeds outbox.Config, whose knobs (outbox.Knobs: default, bounds,
// environment name) are described once in the core, and adds the
// module's own: Table and Migrate. Zero values are the defaults. Presets
// (PresetSingleNode, PresetMultiNode, PresetWriterOnly) are starting
// points, and FromEnv overlays the environment: OUTBOX_… for the default
// data source, OUTBOX_ORDERS_… for "orders" (see EnvVars, generated from
// the same table). An unknown variable under the prefix, or a value that
// does not parse or is out of bounds, makes the app fail to start with an
// error that names the variable (and the closest known one, for a
// misspelling) and wraps outbox.ErrInvalidConfig.
//
// # Health probes
//
// Probes provides a data source's liveness and readiness probes
// (outboxhttp.NewProbes, with the thresholds of an outboxhttp.ReadyConfig)
// as an *outboxhttp.Probes with the data source's name tag; mount its
// Liveness and Readiness handlers on the service's HTTP server.
//
// # Logging
//
// The core logs through log/slog, to the *slog.Logger in the container if
// there is one (else slog.Default()), with an "outbox_ds" field.
// ZerologLogger provides one that writes to the application's
// zerolog.Logger (SlogHandler), and WithZerolog routes fx's own event log
// to the same logger (FxLogger); WithSlog routes it to the *slog.Logger.
// Both are quiet: fx's wiring events (some forty lines per start) are
// dropped, or logged at debug by WithSlog, and only failures show;
// WithZerologVerbose logs the wiring too.
package outboxfx

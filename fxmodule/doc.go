// Package outboxfx wires the transactional outbox into an uber-go/fx
// application, for one data source or several.
//
// Each data source gets its own Store (on its own table and database), Writer,
// Dispatcher with the hot-path hook, Poller, PurgeScheduler and DeadEvents,
// started and stopped by fx.Lifecycle. Module wires the default data source,
// whose values carry no name tag; DataSource wires a named one, whose values
// carry `name:"<data source>"` so that application code injects the right
// Writer:
//
//	fx.New(
//		fx.Supply(logger), // a zerolog.Logger
//		outboxfx.WithZerolog(),
//		outboxfx.SQLDB("orders", "sqlite", outboxsql.SQLiteDSN("orders.db")),
//		outboxfx.DataSource("orders", outboxfx.WithPreset(outboxfx.PresetSingleNode), outboxfx.FromEnv()),
//		outboxfx.Routes("orders", newShippingRoute),
//		fx.Invoke(fx.Annotate(func(w *outbox.Writer, tx *outboxsql.TxManager) { ... },
//			fx.ParamTags(`name:"orders"`, `name:"orders"`))),
//	)
//
// # Listeners
//
// Listeners are contributed as Route values to the data source's value group
// (RouteGroup: "outbox_routes" for the default data source,
// "outbox_routes_orders" for "orders"), with Routes or Listen. A data source
// without routes still starts: it logs a warning, and every event it
// delivers goes to DEAD as unroutable (replayable once a listener exists).
// Two routes for the same (aggregate type, event type) make the app fail to
// start.
//
// # Configuration
//
// Config holds every knob of one data source; zero values are the
// specification's defaults. Presets (PresetSingleNode, PresetMultiNode,
// PresetWriterOnly) are starting points, and FromEnv overlays the
// environment: OUTBOX_… for the default data source, OUTBOX_ORDERS_… for
// "orders" (see EnvVars). An invalid value makes the app fail to start with
// an error that names the variable and wraps outbox.ErrInvalidConfig.
//
// # Logging
//
// The core logs through log/slog; the data sources route it to the
// application's zerolog.Logger with SlogHandler, adding an "outbox_ds" field.
// WithZerolog routes fx's own event log to the same logger (FxLogger).
package outboxfx

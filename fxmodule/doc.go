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
//		fx.Supply(logger), // a zerolog.Logger
//		outboxfx.WithZerolog(),
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
// starts: it logs a warning, and every event it delivers goes to DEAD as
// unroutable (replayable with Client.Dead once a listener exists). Two
// routes for the same event type (on any aggregate, or on the same
// aggregate type) make the app fail to start.
//
// # Configuration
//
// Config holds every knob of one data source, among them its outbox.Mode;
// zero values are the specification's defaults. Presets (PresetSingleNode,
// PresetMultiNode, PresetWriterOnly) are starting points, and FromEnv
// overlays the environment: OUTBOX_… for the default data source,
// OUTBOX_ORDERS_… for "orders" (see EnvVars). An invalid value makes the app fail to start with
// an error that names the variable and wraps outbox.ErrInvalidConfig.
//
// # Logging
//
// The core logs through log/slog; the data sources route it to the
// application's zerolog.Logger with SlogHandler, adding an "outbox_ds" field.
// WithZerolog routes fx's own event log to the same logger (FxLogger).
package outboxfx

package outboxfx

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"slices"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"go.uber.org/fx"
)

// DefaultName is the name of the default data source, the one Module wires.
// Its values carry no fx name tag.
const DefaultName = ""

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,62}$`)

// Route sends the events of one event type of a data source to a Listener:
// on any aggregate type (Client.Handle) when Aggregate is nil, else on that
// aggregate type only (Client.Register), which wins over a route for the
// event type on any aggregate. Contribute routes to a data source's value
// group (RouteGroup) with Routes or Listen; each data source has its own
// group, so the same listener code can serve several data sources.
type Route struct {
	// Aggregate is the aggregate type; nil means any aggregate type
	// (outbox.GlobalAggregate selects only events that name none).
	Aggregate outbox.AggregateType
	// Event is the event type (required).
	Event outbox.EventType
	// Listener handles the events (required). It must be idempotent.
	Listener outbox.Listener
	// Subscriber, when set, makes Listener the subscriber of that name of
	// Event (outbox.Client.Subscribe): several routes of one event type
	// with different subscribers each get every event, and retry on their
	// own. A subscriber's route names no Aggregate.
	Subscriber string
}

// RouteGroup returns the fx value group that holds a data source's routes:
// "outbox_routes" for the default data source, "outbox_routes_orders" for
// the one named "orders".
func RouteGroup(dataSource string) string {
	if dataSource == DefaultName {
		return "outbox_routes"
	}
	return "outbox_routes_" + dataSource
}

// NameTag returns the fx name tag of a data source's values: `name:"orders"`,
// or "" for the default data source. Use it in fx.ParamTags to inject the
// right Client, Store, TxManager or *sql.DB.
func NameTag(dataSource string) string {
	if dataSource == DefaultName {
		return ""
	}
	return `name:"` + dataSource + `"`
}

// Routes provides constructors of routes to a data source: each constructor
// returns a Route or a []Route (optionally with an error) and may take any
// dependencies from the container.
//
//	outboxfx.Routes("orders", newShippingRoute, newInvoiceRoutes)
func Routes(dataSource string, constructors ...any) fx.Option {
	opts := make([]fx.Option, 0, len(constructors))
	for _, c := range constructors {
		tag := `group:"` + RouteGroup(dataSource) + `"`
		if t := reflect.TypeOf(c); t != nil && t.Kind() == reflect.Func && t.NumOut() > 0 && t.Out(0) == reflect.TypeOf([]Route(nil)) {
			tag = `group:"` + RouteGroup(dataSource) + `,flatten"`
		}
		opts = append(opts, fx.Provide(fx.Annotate(c, fx.ResultTags(tag))))
	}
	return fx.Options(opts...)
}

// Listen routes the events of type et on aggregate type at (nil for any
// aggregate type) of a data source to l.
func Listen(dataSource string, at outbox.AggregateType, et outbox.EventType, l outbox.Listener) fx.Option {
	return fx.Supply(fx.Annotated{Group: RouteGroup(dataSource), Target: Route{Aggregate: at, Event: et, Listener: l}})
}

// Subscribe supplies l as the subscriber called name of the events of type
// et of a data source (a Route with Subscriber set): the subscribers of one
// event type each get every event and retry on their own.
func Subscribe(dataSource, name string, et outbox.EventType, l outbox.Listener) fx.Option {
	return fx.Supply(fx.Annotated{Group: RouteGroup(dataSource), Target: Route{Event: et, Listener: l, Subscriber: name}})
}

// Option configures a data source's wiring.
type Option func(*settings)

type settings struct {
	cfg          Config
	err          error
	env          bool
	environ      []string
	externalTx   bool
	clock        outbox.Clock
	metrics      outbox.Metrics
	retry        outbox.RetryPolicy
	interceptors []outbox.Interceptor
	hooks        []outbox.WriterHook
	envelopeOpts func(ctx context.Context) []outbox.EnvelopeOption
	storeOpts    []outboxsql.Option
}

// WithConfig sets the data source's whole configuration, replacing what
// earlier options set.
func WithConfig(c Config) Option {
	return func(s *settings) { s.cfg = c }
}

// WithPreset sets the data source's configuration to a preset's, replacing
// what earlier options set; follow it with Configure to adjust fields.
func WithPreset(p Preset) Option {
	return func(s *settings) {
		c, err := p.Config()
		s.cfg = c
		if err != nil && s.err == nil {
			s.err = err
		}
	}
}

// Configure adjusts the configuration set by earlier options.
//
//	outboxfx.WithPreset(outboxfx.PresetSingleNode),
//	outboxfx.Configure(func(c *outboxfx.Config) { c.Migrate = true }),
func Configure(fn func(*Config)) Option {
	return func(s *settings) {
		if fn != nil {
			fn(&s.cfg)
		}
	}
}

// FromEnv overlays the data source's environment variables (see EnvPrefix,
// EnvVars and Config.LoadEnv) on its configuration when the app is built,
// after every other option, so the environment has the last word. A
// variable that is unknown, does not parse or is out of bounds makes the
// app fail to start with an error that names it.
func FromEnv() Option { return FromEnviron(nil) }

// FromEnviron is FromEnv with the variables given as "NAME=value" entries
// (os.Environ() if nil).
func FromEnviron(environ []string) Option {
	return func(s *settings) { s.env, s.environ = true, environ }
}

// WithTxContext makes the data source take its outbox.TxContext from the
// container (named like the data source), for applications whose
// transactions are run by an ORM adapter (outboxgorm, outboxbun,
// outboxsqlx). Without it the data source builds an outboxsql.TxManager on
// its *sql.DB and provides it. The Store still runs its own statements on
// the *sql.DB; only the writes join the adapter's transactions.
func WithTxContext() Option {
	return func(s *settings) { s.externalTx = true }
}

// WithClock sets the Client's clock (default outbox.SystemClock).
func WithClock(c outbox.Clock) Option { return func(s *settings) { s.clock = c } }

// WithMetrics sets the Client's metrics sink.
func WithMetrics(m outbox.Metrics) Option { return func(s *settings) { s.metrics = m } }

// WithRetryPolicy sets Config.RetryPolicy, which replaces the exponential
// backoff built from Config.RetryBase and Config.RetryMax.
func WithRetryPolicy(p outbox.RetryPolicy) Option { return func(s *settings) { s.retry = p } }

// WithInterceptors adds interceptors that run around every delivery.
func WithInterceptors(ics ...outbox.Interceptor) Option {
	return func(s *settings) { s.interceptors = append(s.interceptors, ics...) }
}

// WithHooks adds writer hooks that run around every Write (for example
// the otel module's, which puts the caller's trace context into the
// events' headers).
func WithHooks(hooks ...outbox.WriterHook) Option {
	return func(s *settings) { s.hooks = append(s.hooks, hooks...) }
}

// WithEnvelopeOptions sets outbox.Config.EnvelopeOptions: the options
// Client.WriteFrom adds to every domain event it writes, drawn from the
// write's context (trace headers, tenant).
func WithEnvelopeOptions(fn func(ctx context.Context) []outbox.EnvelopeOption) Option {
	return func(s *settings) { s.envelopeOpts = fn }
}

// WithStoreOptions adds options of the data source's Store (package
// sqlstore's), after its table: on PostgreSQL, for one, a Listener, with
// which the Client hears the other instances' wake-ups (database/sql
// cannot LISTEN):
//
//	outboxfx.WithStoreOptions(sqlstore.WithListener(outboxpgx.NewListener(directDSN)))
func WithStoreOptions(opts ...outboxsql.Option) Option {
	return func(s *settings) { s.storeOpts = append(s.storeOpts, opts...) }
}

// ResolveConfig returns the configuration DataSource(name, opts...) would
// run with (before defaults are applied), or the error that would make the
// app fail to start.
func ResolveConfig(name string, opts ...Option) (Config, error) {
	s, err := resolve(name, opts)
	return s.cfg, err
}

func resolve(name string, opts []Option) (settings, error) {
	var s settings
	if name != DefaultName && !nameRE.MatchString(name) {
		return s, fmt.Errorf("%w: outboxfx: data source name %q: use a letter followed by letters, digits, '_' or '-' (at most 63)", outbox.ErrInvalidConfig, name)
	}
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	if s.err != nil {
		return s, s.err
	}
	if s.env {
		if err := s.cfg.LoadEnv(EnvPrefix(name), s.environ); err != nil {
			return s, err
		}
	}
	return s, s.cfg.Validate()
}

// Module wires the default data source: DataSource(DefaultName, opts...).
// Its values carry no name tag and its routes are in group "outbox_routes".
func Module(opts ...Option) fx.Option { return DataSource(DefaultName, opts...) }

// DataSource wires one outbox data source into an fx app: an
// outboxsql.Store on the data source's table and one *outbox.Client built
// from the Config, with the data source's routes registered on it. It
// needs from the container:
//
//   - the data source's *sql.DB (named like the data source, e.g.
//     `name:"orders"`; unnamed for the default data source) — see SQLDB;
//   - optionally a *slog.Logger, which receives the core's logs (with an
//     "outbox_ds" field); without one they go to slog.Default() (to log
//     through a zerolog.Logger, add ZerologLogger);
//   - with WithTxContext, the data source's outbox.TxContext (named).
//
// It provides, with the same name tag: *outbox.Client, *outboxsql.Store
// and, unless WithTxContext is given, *outboxsql.TxManager and
// outbox.TxContext. Listeners come from the value group RouteGroup(name).
//
// The Client starts in an OnStart hook that never blocks (the schema is
// created first if Config.Migrate is set) and closes in OnStop, which
// delivers what is queued for up to Config.DrainTimeout (give
// fx.StopTimeout room for that) and waits for every goroutine the Client
// started.
//
// An invalid name or configuration makes the app fail to start with an
// error wrapping outbox.ErrInvalidConfig.
func DataSource(name string, opts ...Option) fx.Option {
	s, err := resolve(name, opts)
	if err != nil {
		return failed(name, err)
	}
	nameTag := NameTag(name)
	groupTag := `group:"` + RouteGroup(name) + `"`
	// The routes are checked before the *sql.DB is asked for (fx builds
	// parameters in order): a bad route then fails the app before a pool
	// is opened that nothing would close.
	checked := fx.Annotate(func(routes []Route) (checkedRoutes, error) {
		if err := checkRoutes(routes); err != nil {
			return nil, fmt.Errorf("outboxfx: data source %q: %w", displayName(name), err)
		}
		return routes, nil
	}, fx.ParamTags(groupTag))
	var ctor any
	if s.externalTx {
		ctor = fx.Annotate(func(lc fx.Lifecycle, routes checkedRoutes, db *sql.DB, log *slog.Logger, tc outbox.TxContext) (*outbox.Client, *outboxsql.Store, error) {
			ds, err := newDataSource(lc, name, s, db, routes, log, tc)
			if err != nil {
				return nil, nil, err
			}
			return ds.client, ds.store, nil
		}, fx.ParamTags(``, ``, nameTag, `optional:"true"`, nameTag), fx.ResultTags(nameTag, nameTag))
	} else {
		ctor = fx.Annotate(func(lc fx.Lifecycle, routes checkedRoutes, db *sql.DB, log *slog.Logger) (*outbox.Client, *outboxsql.Store, *outboxsql.TxManager, outbox.TxContext, error) {
			ds, err := newDataSource(lc, name, s, db, routes, log, nil)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			return ds.client, ds.store, ds.txm, ds.txm, nil
		}, fx.ParamTags(``, ``, nameTag, `optional:"true"`), fx.ResultTags(nameTag, nameTag, nameTag, nameTag))
	}
	return fx.Module(moduleName(name),
		fx.Provide(checked, fx.Private),
		fx.Provide(ctor),
		// Build the Client even if nothing asks for it, so that it runs.
		fx.Invoke(fx.Annotate(func(*outbox.Client) {}, fx.ParamTags(nameTag))),
	)
}

// failed is the option of a data source whose name or configuration is
// invalid: the app fails with err before it invokes anything else. It is
// an invoke, not fx.Error, so that the app's other options still apply:
// with fx.Error, a custom fx logger that needs a provided value (such as
// WithZerolog's) would fail first, with an error about a missing type.
func failed(name string, err error) fx.Option {
	err = fmt.Errorf("outboxfx: data source %q: %w", displayName(name), err)
	return fx.Module(moduleName(name), fx.Invoke(func() error { return err }))
}

func displayName(name string) string {
	if name == DefaultName {
		return "default"
	}
	return name
}

func moduleName(name string) string {
	if name == DefaultName {
		return "outbox"
	}
	return "outbox." + name
}

// checkedRoutes are a data source's routes, checked by checkRoutes.
type checkedRoutes []Route

// checkRoutes registers routes on a scratch Registry, the way build
// registers them on the Client, and returns the first error.
func checkRoutes(routes []Route) error {
	var reg outbox.Registry
	for i, r := range routes {
		if err := register(&reg, r); err != nil {
			return fmt.Errorf("route %d: %w", i, err)
		}
	}
	return nil
}

// register adds r to a Registry or a Client: with Subscribe when it names
// a subscriber, with Handle when it names no aggregate type, else with
// Register.
func register(to interface {
	Handle(outbox.EventType, func(context.Context, outbox.Envelope) error) error
	Register(outbox.AggregateType, outbox.EventType, outbox.Listener) error
	Subscribe(string, outbox.EventType, outbox.Listener) error
}, r Route) error {
	if r.Event == nil || r.Listener == nil {
		return fmt.Errorf("%w: the route has no event type or no listener", outbox.ErrInvalidConfig)
	}
	if r.Subscriber != "" {
		if r.Aggregate != nil {
			return fmt.Errorf("%w: subscriber %q: a subscriber's route names no aggregate type", outbox.ErrInvalidConfig, r.Subscriber)
		}
		return to.Subscribe(r.Subscriber, r.Event, r.Listener)
	}
	if r.Aggregate == nil {
		return to.Handle(r.Event, r.Listener.Handle)
	}
	return to.Register(r.Aggregate, r.Event, r.Listener)
}

// dataSource is what DataSource builds for one data source.
type dataSource struct {
	name   string
	cfg    Config // defaults applied
	store  *outboxsql.Store
	txm    *outboxsql.TxManager // nil with WithTxContext
	client *outbox.Client
	routes int
	log    *slog.Logger
}

// newDataSource builds the Store, the TxManager (unless tc is given) and
// the Client, registers the routes, and appends the lifecycle hook.
func newDataSource(lc fx.Lifecycle, name string, s settings, db *sql.DB, routes checkedRoutes, log *slog.Logger, tc outbox.TxContext) (*dataSource, error) {
	ds, err := build(name, s, db, routes, log, tc)
	if err != nil {
		return nil, fmt.Errorf("outboxfx: data source %q: %w", displayName(name), err)
	}
	lc.Append(fx.Hook{OnStart: ds.start, OnStop: ds.stop})
	return ds, nil
}

func build(name string, s settings, db *sql.DB, routes checkedRoutes, log *slog.Logger, tc outbox.TxContext) (*dataSource, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: no *sql.DB", outbox.ErrInvalidConfig)
	}
	if s.externalTx && tc == nil {
		return nil, fmt.Errorf("%w: WithTxContext, but the outbox.TxContext in the container is nil", outbox.ErrInvalidConfig)
	}
	cfg := s.cfg.WithDefaults()
	if log == nil {
		log = slog.Default()
	}
	log = log.With("outbox_ds", displayName(name))

	store, err := outboxsql.Open(db, append([]outboxsql.Option{outboxsql.WithTable(cfg.Table)}, s.storeOpts...)...)
	if err != nil {
		return nil, err
	}
	ds := &dataSource{name: name, cfg: cfg, store: store, routes: len(routes), log: log}
	if tc == nil {
		ds.txm = outboxsql.NewTxManager(db, outboxsql.WithTxLogger(log))
		tc = ds.txm
	}
	oc := cfg.Config
	oc.Store, oc.TxContext, oc.Logger = store, tc, log
	oc.Clock = cmp.Or(s.clock, oc.Clock)
	oc.Metrics = cmp.Or(s.metrics, oc.Metrics)
	oc.RetryPolicy = cmp.Or(s.retry, oc.RetryPolicy)
	oc.Interceptors = append(slices.Clip(oc.Interceptors), s.interceptors...)
	oc.Hooks = append(slices.Clip(oc.Hooks), s.hooks...)
	if s.envelopeOpts != nil {
		oc.EnvelopeOptions = s.envelopeOpts
	}
	ds.client, err = outbox.New(oc)
	if err != nil {
		return nil, err
	}
	ds.cfg.Owner = ds.client.Owner()
	for i, r := range routes {
		if err := register(ds.client, r); err != nil {
			return nil, fmt.Errorf("route %d: %w", i, err)
		}
	}
	return ds, nil
}

func (ds *dataSource) start(ctx context.Context) error {
	if ds.cfg.Migrate {
		if err := ds.store.Migrate(ctx); err != nil {
			return fmt.Errorf("outboxfx: data source %q: %w", displayName(ds.name), err)
		}
	}
	if err := ds.client.Start(ctx); err != nil {
		return fmt.Errorf("outboxfx: data source %q: start: %w", displayName(ds.name), err)
	}
	c := ds.cfg
	ds.log.Info("outbox: data source started",
		"table", ds.store.Table(), "owner", c.Owner, "mode", c.Mode.String(), "purge", c.purges(), "routes", ds.routes,
		"workers", c.Workers, "poll_interval", c.PollInterval, "lease", c.Lease, "max_attempts", c.MaxAttempts, "ordered", c.Ordered)
	switch {
	case c.Mode == outbox.ModeWriterOnly && ds.routes > 0:
		ds.log.Warn("outbox: writer-only data source: its routes are never called (another process or CDC delivers)", "routes", ds.routes)
	case c.Mode != outbox.ModeWriterOnly && ds.routes == 0:
		ds.log.Warn("outbox: no listener routed to this data source: it claims no event, leaving them pending for another program (contribute routes to group " + RouteGroup(ds.name) + ")")
	}
	if c.Mode == outbox.ModeHotPathOnly {
		ds.log.Warn("outbox: no poller (hot-path-only): retries, delayed and replayed events are left to pollers of other processes")
	}
	return nil
}

func (ds *dataSource) stop(ctx context.Context) error {
	if err := ds.client.Close(ctx); err != nil {
		return fmt.Errorf("outboxfx: data source %q: stop: %w", displayName(ds.name), err)
	}
	ds.log.Info("outbox: data source stopped")
	return nil
}

// SQLDB provides a data source's *sql.DB (named like the data source),
// opened with sql.Open(driverName, dsn). The app fails to start if the
// database cannot be reached (PingContext in OnStart); the pool is closed
// in OnStop, after the data source's Client has closed. Import the
// driver (for example _ "modernc.org/sqlite").
func SQLDB(dataSource, driverName, dsn string) fx.Option {
	open := func(lc fx.Lifecycle) (*sql.DB, error) {
		db, err := sql.Open(driverName, dsn)
		if err != nil {
			return nil, fmt.Errorf("outboxfx: data source %q: open %s database: %w", displayName(dataSource), driverName, err)
		}
		lc.Append(fx.Hook{
			OnStart: func(ctx context.Context) error {
				if err := db.PingContext(ctx); err != nil {
					// fx runs no OnStop for a failed OnStart: close here.
					return errors.Join(fmt.Errorf("outboxfx: data source %q: connect to %s database: %w", displayName(dataSource), driverName, err), db.Close())
				}
				return nil
			},
			OnStop: func(context.Context) error { return db.Close() },
		})
		return db, nil
	}
	return fx.Provide(fx.Annotate(open, fx.ResultTags(NameTag(dataSource))))
}

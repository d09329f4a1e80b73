package outboxfx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/rs/zerolog"
	"go.uber.org/fx"
)

// DefaultName is the name of the default data source, the one Module wires.
// Its values carry no fx name tag.
const DefaultName = ""

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,62}$`)

// Route sends the events of one (aggregate type, event type) of a data
// source to a Listener. Contribute routes to a data source's value group
// (RouteGroup) with Routes or Listen; each data source has its own group,
// so the same listener code can serve several data sources.
type Route struct {
	// Aggregate is the aggregate type; nil means outbox.GlobalAggregate.
	Aggregate outbox.AggregateType
	// Event is the event type (required).
	Event outbox.EventType
	// Listener handles the events (required). It must be idempotent.
	Listener outbox.Listener
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
// right Writer, Stack or TxManager.
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

// Listen routes the events of type et on aggregate type at (nil for
// outbox.GlobalAggregate) of a data source to l.
func Listen(dataSource string, at outbox.AggregateType, et outbox.EventType, l outbox.Listener) fx.Option {
	return fx.Supply(fx.Annotated{Group: RouteGroup(dataSource), Target: Route{Aggregate: at, Event: et, Listener: l}})
}

// Option configures a data source's wiring.
type Option func(*settings)

type settings struct {
	cfg          Config
	err          error
	env          bool
	lookup       func(string) (string, bool)
	externalTx   bool
	clock        outbox.Clock
	metrics      outbox.Metrics
	retry        outbox.RetryPolicy
	interceptors []outbox.Interceptor
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

// FromEnv overlays the data source's environment variables (see EnvPrefix
// and EnvVars) on its configuration when the app is built, after every
// other option, so the environment has the last word. A variable that does
// not parse or is out of range makes the app fail to start.
func FromEnv() Option { return FromEnvLookup(nil) }

// FromEnvLookup is FromEnv with a custom lookup function (os.LookupEnv if nil).
func FromEnvLookup(lookup func(key string) (string, bool)) Option {
	return func(s *settings) { s.env, s.lookup = true, lookup }
}

// WithTxContext makes the data source take its outbox.TxContext from the
// container (named like the data source), for applications whose
// transactions are run by an ORM adapter (outboxgorm, outboxbun,
// outboxsqlx). Without it the data source builds an outboxsql.TxManager on
// its *sql.DB and provides it.
func WithTxContext() Option {
	return func(s *settings) { s.externalTx = true }
}

// WithClock sets the clock of every component (default outbox.SystemClock).
func WithClock(c outbox.Clock) Option { return func(s *settings) { s.clock = c } }

// WithMetrics sets the metrics sink of the dispatcher and poller.
func WithMetrics(m outbox.Metrics) Option { return func(s *settings) { s.metrics = m } }

// WithRetryPolicy replaces the exponential backoff built from
// Config.RetryBase and Config.RetryMax.
func WithRetryPolicy(p outbox.RetryPolicy) Option { return func(s *settings) { s.retry = p } }

// WithInterceptors adds interceptors that run around every delivery.
func WithInterceptors(ics ...outbox.Interceptor) Option {
	return func(s *settings) { s.interceptors = append(s.interceptors, ics...) }
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
		cfg, err := s.cfg.LoadEnv(EnvPrefix(name), s.lookup)
		if err != nil {
			return s, err
		}
		s.cfg = cfg
	}
	return s, s.cfg.Validate()
}

// Module wires the default data source: DataSource(DefaultName, opts...).
// Its values carry no name tag and its routes are in group "outbox_routes".
func Module(opts ...Option) fx.Option { return DataSource(DefaultName, opts...) }

// DataSource wires one outbox data source into an fx app: a Store on the
// data source's table, a Writer, a Dispatcher with its hot-path hook, a
// Poller, a PurgeScheduler and DeadEvents, each as the Config says. It
// needs from the container:
//
//   - the data source's *sql.DB (named like the data source, e.g.
//     `name:"orders"`; unnamed for the default data source) — see SQLDB;
//   - optionally a zerolog.Logger, which receives the core's logs (with an
//     "outbox_ds" field); without one they go to slog.Default();
//   - with WithTxContext, the data source's outbox.TxContext (named).
//
// It provides, with the same name tag: *Stack, *outbox.Writer,
// *outbox.DeadEvents, *outboxsql.Store and, unless WithTxContext is given,
// *outboxsql.TxManager and outbox.TxContext. Listeners come from the value
// group RouteGroup(name).
//
// The components start in an OnStart hook that never blocks (the schema is
// created first if Config.Migrate is set) and stop in OnStop: the poller
// first, then the dispatcher, which delivers what it has queued for up to
// Config.DrainTimeout (give fx.StopTimeout room for that), then the purge
// scheduler. No goroutine outlives OnStop.
//
// An invalid name or configuration makes the app fail to start with an
// error wrapping outbox.ErrInvalidConfig.
func DataSource(name string, opts ...Option) fx.Option {
	s, err := resolve(name, opts)
	if err != nil {
		return fx.Error(fmt.Errorf("outboxfx: data source %q: %w", displayName(name), err))
	}
	nameTag := NameTag(name)
	groupTag := `group:"` + RouteGroup(name) + `"`
	build := func(lc fx.Lifecycle, db *sql.DB, routes []Route, zl zerolog.Logger, tc outbox.TxContext) (*Stack, error) {
		st, err := newStack(name, s, db, routes, zl, tc)
		if err != nil {
			return nil, fmt.Errorf("outboxfx: data source %q: %w", displayName(name), err)
		}
		lc.Append(fx.Hook{OnStart: st.start, OnStop: st.stop})
		return st, nil
	}
	var ctor any
	if s.externalTx {
		ctor = fx.Annotate(build,
			fx.ParamTags(``, nameTag, groupTag, `optional:"true"`, nameTag),
			fx.ResultTags(nameTag))
	} else {
		ctor = fx.Annotate(func(lc fx.Lifecycle, db *sql.DB, routes []Route, zl zerolog.Logger) (*Stack, error) {
			return build(lc, db, routes, zl, nil)
		}, fx.ParamTags(``, nameTag, groupTag, `optional:"true"`), fx.ResultTags(nameTag))
	}
	part := func(f any) any { return fx.Annotate(f, fx.ParamTags(nameTag), fx.ResultTags(nameTag)) }
	provides := []any{
		ctor,
		part(func(st *Stack) *outbox.Writer { return st.writer }),
		part(func(st *Stack) *outbox.DeadEvents { return st.dead }),
		part(func(st *Stack) *outboxsql.Store { return st.store }),
	}
	if !s.externalTx {
		provides = append(provides,
			part(func(st *Stack) *outboxsql.TxManager { return st.txm }),
			part(func(st *Stack) outbox.TxContext { return st.txm }),
		)
	}
	return fx.Module(moduleName(name),
		fx.Provide(provides...),
		// Build the stack even if nothing asks for it, so it runs.
		fx.Invoke(fx.Annotate(func(*Stack) {}, fx.ParamTags(nameTag))),
	)
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

// Stack is one data source's wired components. Inject it (named like the
// data source) to reach any of them.
type Stack struct {
	name   string
	cfg    Config
	db     *sql.DB
	store  *outboxsql.Store
	txm    *outboxsql.TxManager
	tx     outbox.TxContext
	writer *outbox.Writer
	disp   *outbox.Dispatcher
	poller *outbox.Poller
	purger *outbox.PurgeScheduler
	dead   *outbox.DeadEvents
	routes int
	log    *slog.Logger
}

func newStack(name string, s settings, db *sql.DB, routes []Route, zl zerolog.Logger, tc outbox.TxContext) (*Stack, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: no *sql.DB", outbox.ErrInvalidConfig)
	}
	cfg := s.cfg.WithDefaults()
	log := slog.Default()
	if !reflect.ValueOf(zl).IsZero() { // the zero Logger means none was provided
		log = NewSlogLogger(zl)
	}
	log = log.With("outbox_ds", displayName(name))

	store, err := outboxsql.Open(db, outboxsql.WithTable(cfg.Table))
	if err != nil {
		return nil, err
	}
	st := &Stack{name: name, cfg: cfg, db: db, store: store, tx: tc, log: log, routes: len(routes)}
	if tc == nil {
		st.txm = outboxsql.NewTxManager(db, outboxsql.WithTxLogger(log))
		st.tx = st.txm
	}
	st.dead = outbox.NewDeadEvents(store, db, s.clock)

	var hook outbox.WriterHook
	if !cfg.DisableRelay {
		reg := outbox.NewRegistry()
		for i, r := range routes {
			if r.Event == nil || r.Listener == nil {
				return nil, fmt.Errorf("%w: route %d has no event type or no listener", outbox.ErrInvalidConfig, i)
			}
			at := r.Aggregate
			if at == nil {
				at = outbox.GlobalAggregate
			}
			if err := reg.Register(at, r.Event, r.Listener); err != nil {
				return nil, fmt.Errorf("route %d: %w", i, err)
			}
		}
		retry := s.retry
		if retry == nil {
			retry = &outbox.ExponentialBackoff{Base: cfg.RetryBase, Max: cfg.RetryMax}
		}
		st.disp, err = outbox.NewDispatcher(outbox.DispatcherConfig{
			Store: store, DB: db, Registry: reg, Owner: cfg.Owner,
			Workers: cfg.Workers, HotQueueSize: cfg.HotQueueSize, ColdQueueSize: cfg.ColdQueueSize,
			MaxAttempts: cfg.MaxAttempts, RetryPolicy: retry, Interceptors: s.interceptors,
			DrainTimeout: cfg.DrainTimeout, AckBatchSize: cfg.AckBatchSize, AckInterval: cfg.AckInterval,
			Metrics: s.metrics, Logger: log, Clock: s.clock,
		})
		if err != nil {
			return nil, err
		}
		st.cfg.Owner = st.disp.Owner()
		if !cfg.DisableHotPath {
			hook = st.disp.Hook()
		}
		if !cfg.DisablePoller {
			st.poller, err = outbox.NewPoller(outbox.PollerConfig{
				Store: store, DB: db, Dispatcher: st.disp,
				Interval: cfg.PollInterval, BatchSize: cfg.PollBatchSize, SkipRecent: cfg.SkipRecent,
				Lease: cfg.Lease, OwnReclaimAfter: cfg.OwnReclaimAfter, MaxBackoff: cfg.PollMaxBackoff,
				Metrics: s.metrics, Logger: log, Clock: s.clock,
			})
			if err != nil {
				return nil, err
			}
		}
	}
	if !cfg.DisablePurge {
		st.purger, err = outbox.NewPurgeScheduler(outbox.PurgeConfig{
			Purger: store, DB: db, Retention: cfg.Retention, BatchSize: cfg.PurgeBatchSize,
			Interval: cfg.PurgeInterval, Logger: log, Clock: s.clock,
		})
		if err != nil {
			return nil, err
		}
	}
	st.writer, err = outbox.NewWriter(outbox.WriterConfig{TxContext: st.tx, Store: store, Hook: hook, Clock: s.clock, Logger: log})
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (st *Stack) start(ctx context.Context) (err error) {
	if st.cfg.Migrate {
		if err := st.store.Migrate(ctx, st.db); err != nil {
			return fmt.Errorf("outboxfx: data source %q: %w", displayName(st.name), err)
		}
	}
	var started []func(context.Context) error
	defer func() {
		if err == nil {
			return
		}
		for i := len(started) - 1; i >= 0; i-- {
			_ = started[i](ctx)
		}
		err = fmt.Errorf("outboxfx: data source %q: start: %w", displayName(st.name), err)
	}()
	if st.disp != nil {
		if err := st.disp.Start(ctx); err != nil {
			return err
		}
		started = append(started, st.disp.Close)
	}
	if st.poller != nil {
		if err := st.poller.Start(ctx); err != nil {
			return err
		}
		started = append(started, st.poller.Close)
	}
	if st.purger != nil {
		if err := st.purger.Start(ctx); err != nil {
			return err
		}
	}
	c := st.cfg
	st.log.Info("outbox: data source started",
		"table", st.store.Table(), "owner", c.Owner, "relay", st.disp != nil, "hot_path", st.disp != nil && !c.DisableHotPath,
		"poller", st.poller != nil, "purge", st.purger != nil, "routes", st.routes,
		"workers", c.Workers, "poll_interval", c.PollInterval, "lease", c.Lease, "max_attempts", c.MaxAttempts)
	if st.disp != nil && st.routes == 0 {
		st.log.Warn("outbox: no listener routed to this data source: every event it delivers goes to DEAD (contribute routes to group " + RouteGroup(st.name) + ")")
	}
	if st.disp != nil && st.poller == nil {
		st.log.Warn("outbox: poller disabled: retries, delayed and replayed events are left to pollers of other processes")
	}
	return nil
}

func (st *Stack) stop(ctx context.Context) error {
	var errs []error
	if st.poller != nil {
		errs = append(errs, st.poller.Close(ctx))
	}
	if st.disp != nil {
		errs = append(errs, st.disp.Close(ctx))
	}
	if st.purger != nil {
		errs = append(errs, st.purger.Close(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("outboxfx: data source %q: stop: %w", displayName(st.name), err)
	}
	st.log.Info("outbox: data source stopped")
	return nil
}

// Name returns the data source's name ("" for the default data source).
func (st *Stack) Name() string { return st.name }

// Config returns the configuration the stack runs with, defaults applied
// and the owner id filled in.
func (st *Stack) Config() Config { return st.cfg }

// DB returns the data source's pool.
func (st *Stack) DB() *sql.DB { return st.db }

// Store returns the Store on the data source's table.
func (st *Stack) Store() *outboxsql.Store { return st.store }

// TxManager returns the TxManager the data source built, or nil with
// WithTxContext.
func (st *Stack) TxManager() *outboxsql.TxManager { return st.txm }

// TxContext returns the TxContext the Writer finds transactions with.
func (st *Stack) TxContext() outbox.TxContext { return st.tx }

// Writer returns the data source's Writer.
func (st *Stack) Writer() *outbox.Writer { return st.writer }

// Dispatcher returns the dispatcher, or nil when the relay is disabled.
func (st *Stack) Dispatcher() *outbox.Dispatcher { return st.disp }

// Poller returns the poller, or nil when it is disabled.
func (st *Stack) Poller() *outbox.Poller { return st.poller }

// Purger returns the purge scheduler, or nil when it is disabled.
func (st *Stack) Purger() *outbox.PurgeScheduler { return st.purger }

// Dead returns the dead-letter inspector of the data source's table.
func (st *Stack) Dead() *outbox.DeadEvents { return st.dead }

// Rebind rewrites the ? placeholders of a business query for the data
// source's database (see outboxsql.Rebind).
func (st *Stack) Rebind(query string) string { return outboxsql.Rebind(st.store.Dialect(), query) }

// Stats counts the data source's events by status and finds the oldest
// pending one.
func (st *Stack) Stats(ctx context.Context) (outbox.Stats, error) {
	stats, err := st.store.Stats(ctx, st.db)
	if err != nil {
		return stats, fmt.Errorf("outboxfx: data source %q: stats: %w", displayName(st.name), err)
	}
	return stats, nil
}

// SQLDB provides a data source's *sql.DB (named like the data source),
// opened with sql.Open(driverName, dsn). The app fails to start if the
// database cannot be reached (PingContext in OnStart); the pool is closed
// in OnStop, after the data source's components have stopped. Import the
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
					return fmt.Errorf("outboxfx: data source %q: connect to %s database: %w", displayName(dataSource), driverName, err)
				}
				return nil
			},
			OnStop: func(context.Context) error { return db.Close() },
		})
		return db, nil
	}
	return fx.Provide(fx.Annotate(open, fx.ResultTags(NameTag(dataSource))))
}

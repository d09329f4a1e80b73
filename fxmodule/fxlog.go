package outboxfx

import (
	"log/slog"
	"strings"

	"github.com/rs/zerolog"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
)

// FxLogger is an fxevent.Logger that writes fx's own events (provides,
// invokes, lifecycle hooks, start and stop) to a zerolog.Logger.
//
// Quiet unless Verbose: every failure is logged at error with the error
// under "error", and the signal that stops the app at info; the wiring
// events (provided, supplied, decorated, replaced, invoking, run, hook
// executing/executed, started) are dropped — a zerolog.Logger writes debug
// lines unless its level says otherwise, and fx sends some forty of them
// per start. With Verbose they are logged at Level, and "started" at info.
type FxLogger struct {
	// Logger receives the events.
	Logger zerolog.Logger
	// Level is the level of routine wiring events when Verbose; the zero
	// value is zerolog.DebugLevel.
	Level zerolog.Level
	// Verbose logs the wiring events too.
	Verbose bool
}

var _ fxevent.Logger = (*FxLogger)(nil)

// NewFxLogger returns a quiet FxLogger writing to l, with a
// "component":"fx" field.
func NewFxLogger(l zerolog.Logger) *FxLogger {
	return &FxLogger{Logger: l.With().Str("component", "fx").Logger(), Level: zerolog.DebugLevel}
}

// WithZerolog is the fx option that routes fx's event log to the
// zerolog.Logger the application provides, quietly: failures and the stop
// signal only (FxLogger). WithZerologVerbose logs the wiring too.
//
//	fx.New(
//		fx.Supply(logger),          // a zerolog.Logger
//		outboxfx.WithZerolog(),
//		...
//	)
func WithZerolog() fx.Option { return withZerolog(false) }

// WithZerologVerbose is WithZerolog with fx's wiring events (what is
// provided, invoked, started) logged at debug: to see how the app is put
// together.
func WithZerologVerbose() fx.Option { return withZerolog(true) }

func withZerolog(verbose bool) fx.Option {
	return fx.WithLogger(func(l zerolog.Logger) fxevent.Logger {
		fl := NewFxLogger(l)
		fl.Verbose = verbose
		return fl
	})
}

// WithSlog is the fx option that routes fx's event log to the container's
// *slog.Logger (or slog.Default() without one): the wiring events at
// debug, so that a logger at info shows none of them, and failures at
// error.
//
//	fx.New(
//		fx.Supply(slog.New(handler)),
//		outboxfx.WithSlog(),
//		...
//	)
func WithSlog() fx.Option {
	return fx.WithLogger(func(in struct {
		fx.In
		Logger *slog.Logger `optional:"true"`
	}) fxevent.Logger {
		l := in.Logger
		if l == nil {
			l = slog.Default()
		}
		fl := &fxevent.SlogLogger{Logger: l.With("component", "fx")}
		fl.UseLogLevel(slog.LevelDebug)
		fl.UseErrorLevel(slog.LevelError)
		return fl
	})
}

// ZerologLogger provides the *slog.Logger that the data sources log to,
// writing through the zerolog.Logger the application provides
// (NewSlogLogger). Without it, and without a *slog.Logger of the
// application's, they log to slog.Default().
//
//	fx.New(
//		fx.Supply(logger),          // a zerolog.Logger
//		outboxfx.ZerologLogger(),   // the outbox's logs go there
//		outboxfx.WithZerolog(),     // and fx's own
//		...
//	)
func ZerologLogger() fx.Option { return fx.Provide(NewSlogLogger) }

// routine returns the event of a wiring event: nil (which zerolog
// writes nothing for) unless Verbose.
func (l *FxLogger) routine() *zerolog.Event {
	if !l.Verbose {
		return nil
	}
	return l.Logger.WithLevel(l.Level)
}

func (l *FxLogger) failure(err error) *zerolog.Event {
	return l.Logger.Error().Err(err)
}

func withModule(e *zerolog.Event, module string) *zerolog.Event {
	if module != "" {
		e = e.Str("module", module)
	}
	return e
}

// LogEvent implements fxevent.Logger.
func (l *FxLogger) LogEvent(event fxevent.Event) {
	switch e := event.(type) {
	case *fxevent.OnStartExecuting:
		l.routine().Str("callee", e.FunctionName).Str("caller", e.CallerName).Msg("OnStart hook executing")
	case *fxevent.OnStartExecuted:
		if e.Err != nil {
			l.failure(e.Err).Str("callee", e.FunctionName).Str("caller", e.CallerName).Msg("OnStart hook failed")
			return
		}
		l.routine().Str("callee", e.FunctionName).Str("caller", e.CallerName).Str("runtime", e.Runtime.String()).Msg("OnStart hook executed")
	case *fxevent.OnStopExecuting:
		l.routine().Str("callee", e.FunctionName).Str("caller", e.CallerName).Msg("OnStop hook executing")
	case *fxevent.OnStopExecuted:
		if e.Err != nil {
			l.failure(e.Err).Str("callee", e.FunctionName).Str("caller", e.CallerName).Msg("OnStop hook failed")
			return
		}
		l.routine().Str("callee", e.FunctionName).Str("caller", e.CallerName).Str("runtime", e.Runtime.String()).Msg("OnStop hook executed")
	case *fxevent.Supplied:
		if e.Err != nil {
			withModule(l.failure(e.Err), e.ModuleName).Str("type", e.TypeName).Msg("error encountered while applying options")
			return
		}
		withModule(l.routine(), e.ModuleName).Str("type", e.TypeName).Msg("supplied")
	case *fxevent.Provided:
		for _, t := range e.OutputTypeNames {
			ev := withModule(l.routine(), e.ModuleName).Str("constructor", e.ConstructorName).Str("type", t)
			if e.Private {
				ev = ev.Bool("private", true)
			}
			ev.Msg("provided")
		}
		if e.Err != nil {
			withModule(l.failure(e.Err), e.ModuleName).Str("constructor", e.ConstructorName).Msg("error encountered while applying options")
		}
	case *fxevent.Replaced:
		for _, t := range e.OutputTypeNames {
			withModule(l.routine(), e.ModuleName).Str("type", t).Msg("replaced")
		}
		if e.Err != nil {
			withModule(l.failure(e.Err), e.ModuleName).Msg("error encountered while replacing")
		}
	case *fxevent.Decorated:
		for _, t := range e.OutputTypeNames {
			withModule(l.routine(), e.ModuleName).Str("decorator", e.DecoratorName).Str("type", t).Msg("decorated")
		}
		if e.Err != nil {
			withModule(l.failure(e.Err), e.ModuleName).Str("decorator", e.DecoratorName).Msg("error encountered while applying options")
		}
	case *fxevent.BeforeRun:
		withModule(l.routine(), e.ModuleName).Str("name", e.Name).Str("kind", e.Kind).Msg("before run")
	case *fxevent.Run:
		if e.Err != nil {
			withModule(l.failure(e.Err), e.ModuleName).Str("name", e.Name).Str("kind", e.Kind).Msg("error returned")
			return
		}
		withModule(l.routine(), e.ModuleName).Str("name", e.Name).Str("kind", e.Kind).Str("runtime", e.Runtime.String()).Msg("run")
	case *fxevent.Invoking:
		withModule(l.routine(), e.ModuleName).Str("function", e.FunctionName).Msg("invoking")
	case *fxevent.Invoked:
		if e.Err != nil {
			withModule(l.failure(e.Err), e.ModuleName).Str("function", e.FunctionName).Str("stack", e.Trace).Msg("invoke failed")
		}
	case *fxevent.Stopping:
		l.Logger.Info().Str("signal", strings.ToUpper(e.Signal.String())).Msg("received signal")
	case *fxevent.Stopped:
		if e.Err != nil {
			l.failure(e.Err).Msg("stop failed")
		}
	case *fxevent.RollingBack:
		l.failure(e.StartErr).Msg("start failed, rolling back")
	case *fxevent.RolledBack:
		if e.Err != nil {
			l.failure(e.Err).Msg("rollback failed")
		}
	case *fxevent.Started:
		if e.Err != nil {
			l.failure(e.Err).Msg("start failed")
			return
		}
		if l.Verbose {
			l.Logger.Info().Msg("started")
		}
	case *fxevent.LoggerInitialized:
		if e.Err != nil {
			l.failure(e.Err).Msg("custom logger initialization failed")
			return
		}
		l.routine().Str("function", e.ConstructorName).Msg("initialized custom fxevent.Logger")
	}
}

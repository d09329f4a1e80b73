package outboxfx_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxtest"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"github.com/rs/zerolog"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/fx/fxtest"
)

func TestFxLoggerLevels(t *testing.T) {
	var buf outboxtest.LogBuffer
	l := outboxfx.NewFxLogger(zerolog.New(&buf))
	l.Verbose = true
	boom := errors.New("boom")
	for _, e := range []fxevent.Event{
		&fxevent.Provided{ConstructorName: "newThing()", OutputTypeNames: []string{"*Thing"}, ModuleName: "outbox.orders"},
		&fxevent.Invoked{FunctionName: "run()", Err: boom},
		&fxevent.OnStartExecuted{FunctionName: "start()", Err: boom},
		&fxevent.Started{},
		&fxevent.Stopping{Signal: syscall.SIGTERM},
		&fxevent.RollingBack{StartErr: boom},
	} {
		l.LogEvent(e)
	}
	got := buf.JSONLines(t)
	want := []struct{ level, msg string }{
		{"debug", "provided"}, {"error", "invoke failed"}, {"error", "OnStart hook failed"},
		{"info", "started"}, {"info", "received signal"}, {"error", "start failed, rolling back"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %s", len(got), len(want), buf.String())
	}
	for i, w := range want {
		if got[i]["level"] != w.level || got[i]["message"] != w.msg || got[i]["component"] != "fx" {
			t.Errorf("line %d = %v, want level %s message %q component fx", i, got[i], w.level, w.msg)
		}
	}
	if got[0]["module"] != "outbox.orders" || got[0]["type"] != "*Thing" {
		t.Errorf("provided line lacks module or type: %v", got[0])
	}
	if got[1]["error"] != "boom" || got[4]["signal"] != "TERMINATED" {
		t.Errorf("fields: %v / %v", got[1], got[4])
	}

	// Routine events can be raised to info, or dropped with the logger's level.
	buf = outboxtest.LogBuffer{}
	quiet := &outboxfx.FxLogger{Logger: zerolog.New(&buf).Level(zerolog.InfoLevel)}
	quiet.LogEvent(&fxevent.Invoking{FunctionName: "run()"})
	if buf.String() != "" {
		t.Errorf("debug event written at info level: %s", buf.String())
	}
	loud := &outboxfx.FxLogger{Logger: zerolog.New(&buf), Level: zerolog.InfoLevel, Verbose: true}
	loud.LogEvent(&fxevent.Invoking{FunctionName: "run()"})
	if lines := buf.JSONLines(t); len(lines) != 1 || lines[0]["level"] != "info" {
		t.Errorf("Level not applied: %s", buf.String())
	}
}

// quietApp is the documented setup of one data source: its listener, its
// SQLite file, the core's logs and fx's through logging.
func quietApp(t *testing.T, logging ...fx.Option) *fxtest.App {
	t.Helper()
	return fxtest.New(t, append(logging,
		outboxfx.SQLDB(outboxfx.DefaultName, "sqlite", dsn(t, "quiet")),
		outboxfx.Module(outboxfx.WithPreset(outboxfx.PresetSingleNode), outboxfx.Configure(func(c *outboxfx.Config) { c.Migrate = true })),
		outboxfx.Listen(outboxfx.DefaultName, orderAggregate, orderPlaced, outbox.ListenerFunc(func(context.Context, outbox.Envelope) error { return nil })),
	)...)
}

// TestDefaultStartIsQuiet starts and stops the documented setups — a
// zerolog.Logger as zerolog.New makes it (debug lines on), or a
// *slog.Logger at info — and finds no line of fx's: only the outbox's own
// ("outbox: client started", …). WithZerologVerbose shows the wiring.
func TestDefaultStartIsQuiet(t *testing.T) {
	outboxOnly := func(t *testing.T, what string, logs *outboxtest.LogBuffer) {
		t.Helper()
		for _, line := range logs.JSONLines(t) {
			msg, _ := line["message"].(string)
			if msg == "" {
				msg, _ = line["msg"].(string)
			}
			if line["component"] == "fx" || !strings.HasPrefix(msg, "outbox: ") {
				t.Errorf("%s: a start and stop logged %q: %v", what, msg, line)
			}
		}
	}
	var zl outboxtest.LogBuffer
	app := quietApp(t, fx.Supply(zerolog.New(&zl)), outboxfx.ZerologLogger(), outboxfx.WithZerolog())
	app.RequireStart().RequireStop()
	outboxOnly(t, "zerolog", &zl)

	var sl outboxtest.LogBuffer
	app = quietApp(t, fx.Supply(slog.New(slog.NewJSONHandler(&sl, nil))), outboxfx.WithSlog())
	app.RequireStart().RequireStop()
	outboxOnly(t, "slog", &sl)

	// Asked for, the wiring shows.
	var verbose outboxtest.LogBuffer
	app = quietApp(t, fx.Supply(zerolog.New(&verbose)), outboxfx.ZerologLogger(), outboxfx.WithZerologVerbose())
	app.RequireStart().RequireStop()
	fxLines := 0
	for _, line := range verbose.JSONLines(t) {
		if line["component"] == "fx" {
			fxLines++
		}
	}
	if fxLines < 10 {
		t.Errorf("WithZerologVerbose: %d lines of fx's, want its wiring:\n%s", fxLines, verbose.String())
	}
	t.Logf("fx's wiring of one data source: %d lines", fxLines)
	// And WithSlog at debug too.
	var slogDebug outboxtest.LogBuffer
	app = quietApp(t, fx.Supply(slog.New(slog.NewJSONHandler(&slogDebug, &slog.HandlerOptions{Level: slog.LevelDebug}))), outboxfx.WithSlog())
	app.RequireStart().RequireStop()
	if !strings.Contains(slogDebug.String(), `"component":"fx"`) {
		t.Errorf("WithSlog at debug level: no line of fx's:\n%s", slogDebug.String())
	}
}

package outboxfx_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/go-outbox/outbox/core/outboxtest"
	outboxfx "github.com/go-outbox/outbox/fxmodule"
	"github.com/rs/zerolog"
	"go.uber.org/fx/fxevent"
)

func TestFxLoggerLevels(t *testing.T) {
	var buf outboxtest.LogBuffer
	l := outboxfx.NewFxLogger(zerolog.New(&buf))
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
	loud := &outboxfx.FxLogger{Logger: zerolog.New(&buf), Level: zerolog.InfoLevel}
	loud.LogEvent(&fxevent.Invoking{FunctionName: "run()"})
	if lines := buf.JSONLines(t); len(lines) != 1 || lines[0]["level"] != "info" {
		t.Errorf("Level not applied: %s", buf.String())
	}
}

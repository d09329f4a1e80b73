package outboxfx

import (
	"context"
	"log/slog"
	"slices"

	"github.com/rs/zerolog"
)

// SlogHandler is a slog.Handler that writes through a zerolog.Logger, so
// the outbox core (which logs with log/slog) ends up in the application's
// zerolog output: same writer, same level, same context fields.
//
// Levels map as: below slog.LevelDebug → trace, debug → debug, info → info,
// warn → warn, error and above → error. The zerolog logger's level and
// zerolog.GlobalLevel decide what is enabled. Attribute groups become nested
// JSON objects; the record's time is left to the zerolog logger (add
// .Timestamp() to its context to log one).
type SlogHandler struct {
	logger zerolog.Logger
	attrs  []slog.Attr  // attributes added before the first group
	groups []groupFrame // open groups, outermost first
}

type groupFrame struct {
	name  string
	attrs []slog.Attr
}

var _ slog.Handler = (*SlogHandler)(nil)

// NewSlogHandler returns a handler that logs to l.
func NewSlogHandler(l zerolog.Logger) *SlogHandler { return &SlogHandler{logger: l} }

// NewSlogLogger returns a *slog.Logger that logs to l.
func NewSlogLogger(l zerolog.Logger) *slog.Logger { return slog.New(NewSlogHandler(l)) }

// ZerologLevel maps a slog level to the zerolog level SlogHandler uses.
func ZerologLevel(l slog.Level) zerolog.Level {
	switch {
	case l < slog.LevelDebug:
		return zerolog.TraceLevel
	case l < slog.LevelInfo:
		return zerolog.DebugLevel
	case l < slog.LevelWarn:
		return zerolog.InfoLevel
	case l < slog.LevelError:
		return zerolog.WarnLevel
	}
	return zerolog.ErrorLevel
}

// Enabled reports whether the zerolog logger writes records of level l.
func (h *SlogHandler) Enabled(_ context.Context, l slog.Level) bool {
	zl := ZerologLevel(l)
	return zl >= h.logger.GetLevel() && zl >= zerolog.GlobalLevel()
}

// Handle writes r as one zerolog event.
func (h *SlogHandler) Handle(_ context.Context, r slog.Record) error {
	e := h.logger.WithLevel(ZerologLevel(r.Level))
	if e == nil {
		return nil
	}
	for _, a := range h.attrs {
		appendAttr(e, a)
	}
	if len(h.groups) == 0 {
		r.Attrs(func(a slog.Attr) bool {
			appendAttr(e, a)
			return true
		})
	} else {
		var recAttrs []slog.Attr
		if r.NumAttrs() > 0 {
			recAttrs = make([]slog.Attr, 0, r.NumAttrs())
			r.Attrs(func(a slog.Attr) bool {
				recAttrs = append(recAttrs, a)
				return true
			})
		}
		h.appendGroups(e, 0, recAttrs)
	}
	e.Msg(r.Message)
	return nil
}

// appendGroups writes group i (and the groups it contains, and finally the
// record's own attributes) as a nested object, or nothing if it is empty.
func (h *SlogHandler) appendGroups(e *zerolog.Event, i int, recAttrs []slog.Attr) {
	if !h.groupHasContent(i, recAttrs) {
		return
	}
	g := h.groups[i]
	d := e.CreateDict()
	for _, a := range g.attrs {
		appendAttr(d, a)
	}
	if i+1 < len(h.groups) {
		h.appendGroups(d, i+1, recAttrs)
	} else {
		for _, a := range recAttrs {
			appendAttr(d, a)
		}
	}
	e.Dict(g.name, d)
}

func (h *SlogHandler) groupHasContent(i int, recAttrs []slog.Attr) bool {
	for _, a := range recAttrs {
		if !isEmpty(a) {
			return true
		}
	}
	for _, g := range h.groups[i:] {
		for _, a := range g.attrs {
			if !isEmpty(a) {
				return true
			}
		}
	}
	return false
}

// WithAttrs returns a handler that adds attrs to every record.
func (h *SlogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	h2 := h.clone()
	if n := len(h2.groups); n > 0 {
		h2.groups[n-1].attrs = append(slices.Clip(h2.groups[n-1].attrs), attrs...)
	} else {
		h2.attrs = append(slices.Clip(h2.attrs), attrs...)
	}
	return h2
}

// WithGroup returns a handler that nests later attributes under name.
func (h *SlogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := h.clone()
	h2.groups = append(h2.groups, groupFrame{name: name})
	return h2
}

func (h *SlogHandler) clone() *SlogHandler {
	return &SlogHandler{logger: h.logger, attrs: slices.Clip(h.attrs), groups: slices.Clone(h.groups)}
}

func isEmpty(a slog.Attr) bool {
	if a.Key == "" && a.Value.Kind() != slog.KindGroup {
		return true
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, sub := range a.Value.Group() {
			if !isEmpty(sub) {
				return false
			}
		}
		return true
	}
	return false
}

// appendAttr adds one attribute to e (an event or a dictionary).
func appendAttr(e *zerolog.Event, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if isEmpty(a) {
		return
	}
	key, v := a.Key, a.Value
	switch v.Kind() {
	case slog.KindString:
		e.Str(key, v.String())
	case slog.KindInt64:
		e.Int64(key, v.Int64())
	case slog.KindUint64:
		e.Uint64(key, v.Uint64())
	case slog.KindFloat64:
		e.Float64(key, v.Float64())
	case slog.KindBool:
		e.Bool(key, v.Bool())
	case slog.KindDuration:
		e.Str(key, v.Duration().String())
	case slog.KindTime:
		e.Time(key, v.Time())
	case slog.KindGroup:
		if key == "" { // an inline group: its attributes belong to the parent
			for _, sub := range v.Group() {
				appendAttr(e, sub)
			}
			return
		}
		d := e.CreateDict()
		for _, sub := range v.Group() {
			appendAttr(d, sub)
		}
		e.Dict(key, d)
	default:
		switch x := v.Any().(type) {
		case error:
			e.AnErr(key, x)
		case []byte:
			e.Bytes(key, x)
		default:
			e.Interface(key, x)
		}
	}
}

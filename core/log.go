package outbox

import "log/slog"

// eventAttrs returns what every log line about e carries, as one inline
// group (a handler writes its attributes at the top level): event_id,
// event_type and, when e has one, tenant_id.
func eventAttrs(e Envelope) slog.Attr {
	attrs := make([]slog.Attr, 2, 3)
	attrs[0], attrs[1] = slog.String("event_id", e.ID()), slog.String("event_type", e.Type())
	if t := e.TenantID(); t != "" {
		attrs = append(attrs, slog.String("tenant_id", t))
	}
	return slog.Attr{Value: slog.GroupValue(attrs...)}
}

package outbox

// Earlier versions of Metrics had argument-less counters (HotEnqueued,
// HotDropped, ColdEnqueued, DispatchSuccess, DispatchFailure,
// DispatchDead). An implementation that still has some of them keeps
// receiving them, beside the new methods, until it moves to EventEnqueued,
// EventDropped, Delivered, Failed and Dead: this forwarding goes away in a
// later release.

// legacyMetrics calls the argument-less counters m has, after the new
// methods.
type legacyMetrics struct {
	Metrics
	hotEnqueued, hotDropped, coldEnqueued, success, failure, dead func()
}

// withLegacy wraps m in a legacyMetrics if it has any of the old counters.
func withLegacy(m Metrics) Metrics {
	if _, ok := m.(*legacyMetrics); ok {
		return m
	}
	l := &legacyMetrics{Metrics: m}
	if i, ok := m.(interface{ HotEnqueued() }); ok {
		l.hotEnqueued = i.HotEnqueued
	}
	if i, ok := m.(interface{ HotDropped() }); ok {
		l.hotDropped = i.HotDropped
	}
	if i, ok := m.(interface{ ColdEnqueued() }); ok {
		l.coldEnqueued = i.ColdEnqueued
	}
	if i, ok := m.(interface{ DispatchSuccess() }); ok {
		l.success = i.DispatchSuccess
	}
	if i, ok := m.(interface{ DispatchFailure() }); ok {
		l.failure = i.DispatchFailure
	}
	if i, ok := m.(interface{ DispatchDead() }); ok {
		l.dead = i.DispatchDead
	}
	if l.hotEnqueued == nil && l.hotDropped == nil && l.coldEnqueued == nil && l.success == nil && l.failure == nil && l.dead == nil {
		return m
	}
	return l
}

// EventEnqueued counts with m, then with its HotEnqueued or ColdEnqueued.
func (l *legacyMetrics) EventEnqueued(eventType string, p Path) {
	l.Metrics.EventEnqueued(eventType, p)
	if p == PathHot {
		call(l.hotEnqueued)
	} else {
		call(l.coldEnqueued)
	}
}

// EventDropped counts with m, then with its HotDropped.
func (l *legacyMetrics) EventDropped(eventType string) {
	l.Metrics.EventDropped(eventType)
	call(l.hotDropped)
}

// Delivered counts with m, then with its DispatchSuccess.
func (l *legacyMetrics) Delivered(eventType string) {
	l.Metrics.Delivered(eventType)
	call(l.success)
}

// Failed counts with m, then with its DispatchFailure.
func (l *legacyMetrics) Failed(eventType string) {
	l.Metrics.Failed(eventType)
	call(l.failure)
}

// Dead counts with m, then with its DispatchDead.
func (l *legacyMetrics) Dead(eventType string) {
	l.Metrics.Dead(eventType)
	call(l.dead)
}

func call(f func()) {
	if f != nil {
		f()
	}
}

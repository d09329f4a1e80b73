package outbox

import (
	"strconv"
	"strings"
	"testing"
)

// By default an event that no route of the Client handles is never
// destroyed: it is left pending for another program, no attempt used,
// and the Client warns once per type, not once per event.
func TestUnroutedEventsArePendingAndWarnedOncePerType(t *testing.T) {
	h := newHarness(t, nil)
	h.start(t)
	var ids []string
	for _, typ := range []string{"OtherServiceEvent", "OtherServiceEvent", "OtherServiceEvent", "AnotherOne", "AnotherOne"} {
		ids = append(ids, h.commit(t, evt(typ))...)
	}
	for _, id := range ids {
		r := h.waitStatus(t, id, StatusRetry)
		if r.Attempts != 0 || r.AvailableAt.Sub(h.clk.Now()) != DefaultUnroutedRetry {
			t.Errorf("%s: %d attempts, due in %v; want none used, due in %v", id, r.Attempts, r.AvailableAt.Sub(h.clk.Now()), DefaultUnroutedRetry)
		}
	}
	logged := h.log.String()
	for typ, want := range map[string]int{"OtherServiceEvent": 1, "AnotherOne": 1} {
		if n := strings.Count(logged, "level=WARN msg=\"outbox: this client has no listener for an event type; its events are left pending for another program and offered again later (logged once per type)\" outbox_owner="+h.d.Owner()+" event_type="+typ+" "); n != want {
			t.Errorf("warnings naming %s: %d; want %d\n%s", typ, n, want, logged)
		}
	}
	if strings.Contains(logged, "moved to DEAD") || h.metrics.get("DispatchDead") != 0 {
		t.Errorf("an unrouted event went DEAD:\n%s", logged)
	}
}

// The set of warned types is bounded: types come from the table.
func TestUnroutedWarningsAreBounded(t *testing.T) {
	h := newHarness(t, nil)
	for i := range maxUnroutedTypes + 10 {
		h.d.claims.reportUnrouted(evt("T"+strconv.Itoa(i)), DefaultUnroutedRetry)
	}
	if n := len(h.d.claims.unroutedTypes); n != maxUnroutedTypes {
		t.Errorf("remembered %d types; want the bound, %d", n, maxUnroutedTypes)
	}
}

package outboxhttp

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/outboxsql/outboxsqltest"
	"github.com/go-outbox/outbox/core/outboxtest"
	"github.com/go-sql-driver/mysql"
)

func TestReadEndpoints(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		e := newEnv(t, b, nil)
		s := e.seed()

		var info infoJSON
		e.req("GET", "/api", "").want(t, http.StatusOK, &info)
		if info.Title != "outbox" || info.ReadOnly || !info.Authorized || len(info.Sources) != 1 || info.Sources[0].Name != "orders" {
			t.Errorf("api: %+v", info)
		}

		var st statsJSON
		e.req("GET", "/api/orders/stats", "").want(t, http.StatusOK, &st)
		want := map[string]int64{"NEW": 2, "RETRY": 1, "DONE": 2, "DEAD": 4}
		if st.Source != "orders" || !mapsEqual(st.Counts, want) || st.Total != 9 || st.Pending != 3 ||
			st.OldestPendingAt == nil || st.OldestPendingAgeSeconds == nil || *st.OldestPendingAgeSeconds < 0 {
			t.Errorf("stats: %+v", st)
		}

		list := func(query string) listJSON {
			t.Helper()
			var l listJSON
			e.req("GET", "/api/orders/events"+query, "").want(t, http.StatusOK, &l)
			return l
		}
		for query, want := range map[string][]string{
			"":                                   s.all,
			"?status=DEAD":                       s.dead(),
			"?status=dead":                       s.dead(),
			"?status=pending":                    append(slices.Clone(s.pending), s.retry),
			"?status=RETRY,DONE":                 append([]string{s.retry}, s.done...),
			"?type=OrderPlaced&status=DEAD":      {s.placed, s.placed2},
			"?aggregate=Invoice":                 {s.invoice},
			"?type=OrderShipped":                 {s.retry},
			"?type=NoSuchEvent":                  {},
			"?tenant=acme":                       {s.placed},
			"?tenant=acme&status=DEAD":           {s.placed},
			"?tenant=acme&status=pending":        {},
			"?tenant=nobody":                     {},
			"?after=" + s.done[1] + "&limit=500": s.all[5:],
		} {
			l := list(query)
			if got := ids(l.Events); !slices.Equal(got, want) || l.NextAfter != "" || l.Matching != nil {
				t.Errorf("events%s: %q next %q matching %v; want %q", query, got, l.NextAfter, l.Matching, want)
			}
		}
		// Pages of 4 follow each other to the end.
		var paged []string
		after := ""
		for range 3 {
			l := list("?limit=4&after=" + after)
			paged = append(paged, ids(l.Events)...)
			if after = l.NextAfter; after == "" {
				break
			}
			if after != l.Events[len(l.Events)-1].ID {
				t.Fatalf("next_after %q is not the page's last id", after)
			}
		}
		if !slices.Equal(paged, s.all) || after != "" {
			t.Errorf("paged: %q (next %q); want %q", paged, after, s.all)
		}
		// A list leaves out payloads and headers but says what they are.
		for _, ev := range list("?aggregate=Invoice").Events {
			if ev.Payload != nil || ev.Headers != nil || ev.PayloadKind != "bytes" || ev.PayloadSize != len(invoiceBytes) ||
				ev.Type != "InvoiceSent" || ev.AggregateID != "i-9" || ev.Status != "DEAD" || ev.Attempts != 1 ||
				ev.LastError != "boom: listener failed\nsecond line" || ev.DoneAt == nil || ev.CreatedAt == nil {
				t.Errorf("listed event: %+v", ev)
			}
		}

		var ev eventJSON
		e.req("GET", "/api/orders/events/"+s.placed, "").want(t, http.StatusOK, &ev)
		if ev.ID != s.placed || ev.Type != "OrderPlaced" || ev.AggregateType != "Order" || ev.AggregateID != "o-6" || ev.TenantID != "acme" ||
			ev.Status != "DEAD" || ev.PayloadKind != "json" || compact(t, ev.Payload) != placedJSON || ev.PayloadSize != len(placedJSON) ||
			len(ev.Headers) != 1 || ev.Headers["traceparent"] == "" || ev.OccurredAt == nil {
			t.Errorf("event %s: %+v (payload %s)", s.placed, ev, ev.Payload)
		}
		ev = eventJSON{}
		e.req("GET", "/api/orders/events/"+s.invoice, "").want(t, http.StatusOK, &ev)
		var b64 string
		if err := json.Unmarshal(ev.Payload, &b64); err != nil || b64 != base64.StdEncoding.EncodeToString(invoiceBytes) || ev.Headers == nil {
			t.Errorf("event %s: payload %s (%v), headers %v", s.invoice, ev.Payload, err, ev.Headers)
		}
		e.req("GET", "/api/orders/events/01JD5K3Q8V4N2M7XGZ6P1R9T0B", "").wantError(t, http.StatusNotFound, codeNotFound,
			"no event with id 01JD5K3Q8V4N2M7XGZ6P1R9T0B")

		dead := func(query string) listJSON {
			t.Helper()
			var l listJSON
			e.req("GET", "/api/orders/dead"+query, "").want(t, http.StatusOK, &l)
			if l.Matching == nil {
				t.Fatalf("dead%s: no matching count", query)
			}
			return l
		}
		for query, want := range map[string][]string{
			"":                                    s.dead(),
			"?type=OrderPlaced":                   {s.placed, s.placed2},
			"?aggregate=Order":                    {s.placed, s.placed2, s.cancelled},
			"?type=OrderPlaced&aggregate=Invoice": {},
			"?tenant=acme":                        {s.placed},
			"?tenant=acme&type=InvoiceSent":       {},
		} {
			l := dead(query)
			if got := ids(l.Events); !slices.Equal(got, want) || *l.Matching != int64(len(want)) || l.NextAfter != "" {
				t.Errorf("dead%s: %q, matching %d, next %q; want %q", query, got, *l.Matching, l.NextAfter, want)
			}
		}
		// The count is of every match, whatever the page.
		l := dead("?limit=1&after=" + s.placed)
		if got := ids(l.Events); !slices.Equal(got, []string{s.placed2}) || l.NextAfter != s.placed2 || *l.Matching != 4 {
			t.Errorf("dead page: %q, next %q, matching %d", got, l.NextAfter, *l.Matching)
		}
	})
}

// compact returns the JSON document b without insignificant spaces.
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return buf.String()
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestMutations(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		t.Run("ReplayOne", func(t *testing.T) {
			e := newEnv(t, b, nil)
			s := e.seed()
			var c changeJSON
			e.req("POST", "/api/orders/dead/"+s.placed+"/replay", "{}").want(t, http.StatusOK, &c)
			if c.Replayed == nil || *c.Replayed != 1 || c.Deleted != nil || !slices.Equal(c.IDs, []string{s.placed}) {
				t.Errorf("replay: %+v", c)
			}
			rec, err := e.store.Get(context.Background(), s.placed)
			if err != nil || rec.Status != outbox.StatusNew || rec.Attempts != 0 || rec.LockedBy != "" {
				t.Fatalf("replayed event: %+v, %v", rec, err)
			}
			if got := e.statuses(s.placed2, s.invoice, s.cancelled); !slices.Equal(got, []string{"DEAD", "DEAD", "DEAD"}) {
				t.Errorf("the other DEAD events: %q", got)
			}
			if !strings.Contains(e.log.String(), "replayed DEAD events") || !strings.Contains(e.log.String(), s.placed) {
				t.Errorf("no audit log of the replay:\n%s", e.log)
			}
			// No longer DEAD, unknown: 404, and nothing changes.
			before := e.snapshot()
			e.req("POST", "/api/orders/dead/"+s.placed+"/replay", "").wantError(t, http.StatusNotFound, codeNotFound,
				"event "+s.placed+" is NEW, not DEAD", "nothing changed")
			e.req("POST", "/api/orders/dead/01JD5K3Q8V4N2M7XGZ6P1R9T0B/replay", "").wantError(t, http.StatusNotFound, codeNotFound,
				"no event with id 01JD5K3Q8V4N2M7XGZ6P1R9T0B")
			e.wantUnchanged(before)
		})
		t.Run("ReplayIDs", func(t *testing.T) {
			e := newEnv(t, b, nil)
			s := e.seed()
			before := e.snapshot()
			for _, bad := range [][]string{
				{s.placed, "01JD5K3Q8V4N2M7XGZ6P1R9T0B"}, // unknown
				{s.placed, s.done[0]},                    // DONE
				{s.pending[0], s.placed2, s.retry},       // NEW, RETRY
			} {
				e.req("POST", "/api/orders/dead/replay", idsBody(bad...)).wantError(t, http.StatusNotFound, codeNotFound, "nothing changed")
			}
			e.wantUnchanged(before)
			var c changeJSON
			e.req("POST", "/api/orders/dead/replay", idsBody(s.invoice, s.placed, s.invoice)).want(t, http.StatusOK, &c)
			if c.Replayed == nil || *c.Replayed != 2 || !slices.Equal(c.IDs, []string{s.invoice, s.placed}) {
				t.Errorf("replay: %+v", c)
			}
			if got := e.statuses(s.dead()...); !slices.Equal(got, []string{"NEW", "DEAD", "NEW", "DEAD"}) {
				t.Errorf("statuses: %q", got)
			}
		})
		t.Run("ReplayAll", func(t *testing.T) {
			e := newEnv(t, b, nil)
			s := e.seed()
			var c changeJSON
			e.req("POST", "/api/orders/dead/replay", `{"all": true, "type": "OrderPlaced", "aggregate": "Order"}`).want(t, http.StatusOK, &c)
			if c.Replayed == nil || *c.Replayed != 2 || c.IDs != nil {
				t.Errorf("replay all of OrderPlaced: %+v", c)
			}
			if got := e.statuses(s.dead()...); !slices.Equal(got, []string{"NEW", "NEW", "DEAD", "DEAD"}) {
				t.Errorf("statuses: %q", got)
			}
			before := e.snapshot()
			c = changeJSON{}
			e.req("POST", "/api/orders/dead/replay", `{"all": true, "type": "NoSuchEvent"}`).want(t, http.StatusOK, &c)
			if c.Replayed == nil || *c.Replayed != 0 {
				t.Errorf("replay all of nothing: %+v", c)
			}
			e.wantUnchanged(before)
			c = changeJSON{}
			e.req("POST", "/api/orders/dead/replay", `{"all": true}`).want(t, http.StatusOK, &c)
			if c.Replayed == nil || *c.Replayed != 2 {
				t.Errorf("replay all: %+v", c)
			}
			if got := e.statuses(s.all...); slices.Contains(got, "DEAD") || slices.Contains(got, "gone") {
				t.Errorf("statuses after replaying all: %q", got)
			}
			if got := e.statuses(s.done...); !slices.Equal(got, []string{"DONE", "DONE"}) {
				t.Errorf("DONE events: %q", got)
			}
		})
		t.Run("ReplayAllOfATenant", func(t *testing.T) {
			e := newEnv(t, b, nil)
			s := e.seed()
			var c changeJSON
			e.req("POST", "/api/orders/dead/replay", `{"all": true, "tenant": "acme"}`).want(t, http.StatusOK, &c)
			if c.Replayed == nil || *c.Replayed != 1 {
				t.Errorf("replay all of tenant acme: %+v", c)
			}
			if got := e.statuses(s.dead()...); !slices.Equal(got, []string{"NEW", "DEAD", "DEAD", "DEAD"}) {
				t.Errorf("statuses: %q", got)
			}
			if !strings.Contains(e.log.String(), "tenant=acme") {
				t.Errorf("the audit log does not name the tenant:\n%s", e.log)
			}
		})
		t.Run("Delete", func(t *testing.T) {
			e := newEnv(t, b, nil)
			s := e.seed()
			before := e.snapshot()
			e.req("DELETE", "/api/orders/dead/"+s.done[0], "").wantError(t, http.StatusNotFound, codeNotFound, "is DONE, not DEAD", "nothing changed")
			e.req("DELETE", "/api/orders/dead/01JD5K3Q8V4N2M7XGZ6P1R9T0B", "").wantError(t, http.StatusNotFound, codeNotFound, "no event with id")
			e.req("POST", "/api/orders/dead/delete", idsBody(s.placed, s.pending[1], "01JD5K3Q8V4N2M7XGZ6P1R9T0B")).wantError(t, http.StatusNotFound, codeNotFound,
				"event "+s.pending[1]+" is NEW, not DEAD (and 1 more of the ids are not DEAD events); nothing changed")
			e.wantUnchanged(before)

			var c changeJSON
			e.req("DELETE", "/api/orders/dead/"+s.cancelled, "").want(t, http.StatusOK, &c)
			if c.Deleted == nil || *c.Deleted != 1 || c.Replayed != nil || !slices.Equal(c.IDs, []string{s.cancelled}) {
				t.Errorf("delete: %+v", c)
			}
			c = changeJSON{}
			e.req("POST", "/api/orders/dead/delete", idsBody(s.placed, s.invoice)).want(t, http.StatusOK, &c)
			if c.Deleted == nil || *c.Deleted != 2 || !slices.Equal(c.IDs, []string{s.placed, s.invoice}) {
				t.Errorf("delete: %+v", c)
			}
			if got := e.statuses(s.dead()...); !slices.Equal(got, []string{"gone", "DEAD", "gone", "gone"}) {
				t.Errorf("statuses: %q", got)
			}
			if !strings.Contains(e.log.String(), "deleted DEAD events") {
				t.Errorf("no audit log of the deletes:\n%s", e.log)
			}
		})
	})
}

func idsBody(ids ...string) string {
	b, _ := json.Marshal(map[string][]string{"ids": ids})
	return string(b)
}

// TestBadInput sends malformed, unknown and forged requests: each gets its
// JSON error and nothing changes.
func TestBadInput(t *testing.T) {
	e := newEnv(t, sqlite(t), nil)
	s := e.seed()
	before := e.snapshot()
	long := strings.Repeat("x", 200)
	for _, c := range []struct {
		method, path, body string
		hdr                []string
		status             int
		code, msg          string
	}{
		// Filters and paging.
		{"GET", "/api/orders/events?status=LOST", "", nil, 400, codeBadRequest, `status: "LOST"`},
		{"GET", "/api/orders/events?status=DEAD,", "", nil, 400, codeBadRequest, `status: ""`},
		{"GET", "/api/orders/events?limit=0", "", nil, 400, codeBadRequest, "limit"},
		{"GET", "/api/orders/events?limit=-3", "", nil, 400, codeBadRequest, "limit"},
		{"GET", "/api/orders/events?limit=ten", "", nil, 400, codeBadRequest, "limit"},
		{"GET", "/api/orders/events?limit=501", "", nil, 400, codeBadRequest, "from 1 to 500"},
		{"GET", "/api/orders/events?after=" + long, "", nil, 400, codeBadRequest, "after"},
		{"GET", "/api/orders/events?type=" + long, "", nil, 400, codeBadRequest, "type"},
		{"GET", "/api/orders/events?aggregate=" + long, "", nil, 400, codeBadRequest, "aggregate"},
		{"GET", "/api/orders/events?tenant=" + long, "", nil, 400, codeBadRequest, "tenant"},
		{"GET", "/api/orders/dead?tenant=" + long, "", nil, 400, codeBadRequest, "tenant"},
		{"GET", "/api/orders/dead?tenant=a&tenant=b", "", nil, 400, codeBadRequest, "given 2 times"},
		{"GET", "/api/orders/events?stauts=DEAD", "", nil, 400, codeBadRequest, `unknown query parameter "stauts"`},
		{"GET", "/api/orders/events?type=A&type=B", "", nil, 400, codeBadRequest, "given 2 times"},
		{"GET", "/api/orders/dead?status=NEW", "", nil, 400, codeBadRequest, `unknown query parameter "status"`},
		{"GET", "/api/orders/stats?x=1", "", nil, 400, codeBadRequest, "takes none"},
		{"GET", "/api/orders/events/" + s.placed + "?full=1", "", nil, 400, codeBadRequest, "takes none"},
		// Unknown things.
		{"GET", "/api/billing/stats", "", nil, 404, codeNotFound, `no source named "billing" (sources: orders)`},
		{"POST", "/api/billing/dead/replay", idsBody(s.placed), nil, 404, codeNotFound, "no source"},
		{"GET", "/api/orders/nothing", "", nil, 404, codeNotFound, "no endpoint"},
		{"GET", "/api/orders/dead/" + s.placed, "", nil, 405, codeMethodNotAllowed, "use DELETE"},
		// Methods.
		{"POST", "/api/orders/stats", "{}", nil, 405, codeMethodNotAllowed, "use GET"},
		{"DELETE", "/api/orders/events/" + s.placed, "", nil, 405, codeMethodNotAllowed, "use GET"},
		{"GET", "/api/orders/dead/" + s.placed + "/replay", "", nil, 405, codeMethodNotAllowed, "use POST"},
		{"PUT", "/api/orders/dead/replay", idsBody(s.placed), nil, 405, codeMethodNotAllowed, "use POST"},
		{"GET", "/api/orders/dead/delete", "", nil, 405, codeMethodNotAllowed, "use POST"},
		// Bodies.
		{"POST", "/api/orders/dead/replay", "", nil, 400, codeBadRequest, "empty body"},
		{"POST", "/api/orders/dead/replay", "{", nil, 400, codeBadRequest, "body"},
		{"POST", "/api/orders/dead/replay", `{"ids": "` + s.placed + `"}`, nil, 400, codeBadRequest, "body"},
		{"POST", "/api/orders/dead/replay", `{"id": ["` + s.placed + `"]}`, nil, 400, codeBadRequest, `unknown field "id"`},
		{"POST", "/api/orders/dead/replay", idsBody(s.placed) + idsBody(s.invoice), nil, 400, codeBadRequest, "more than one JSON value"},
		{"POST", "/api/orders/dead/replay", `{}`, nil, 400, codeBadRequest, "no ids"},
		{"POST", "/api/orders/dead/replay", `{"ids": []}`, nil, 400, codeBadRequest, "no ids"},
		{"POST", "/api/orders/dead/replay", idsBody(s.placed, ""), nil, 400, codeBadRequest, "empty id"},
		{"POST", "/api/orders/dead/replay", idsBody(s.placed, long), nil, 400, codeBadRequest, "not an event id"},
		{"POST", "/api/orders/dead/replay", idsBody(slices.Repeat([]string{s.placed}, 501)...), nil, 400, codeBadRequest, "at most 500"},
		{"POST", "/api/orders/dead/replay", `{"all": true, "ids": ["` + s.placed + `"]}`, nil, 400, codeBadRequest, "not both"},
		{"POST", "/api/orders/dead/replay", `{"all": false, "type": "OrderPlaced"}`, nil, 400, codeBadRequest, `"all": true only`},
		{"POST", "/api/orders/dead/replay", `{"all": true, "type": "` + long + `"}`, nil, 400, codeBadRequest, "type"},
		{"POST", "/api/orders/dead/replay", `{"all": true, "tenant": "` + long + `"}`, nil, 400, codeBadRequest, "tenant"},
		{"POST", "/api/orders/dead/replay", `{"ids": ["` + s.placed + `"], "tenant": "acme"}`, nil, 400, codeBadRequest, `"all": true only`},
		{"POST", "/api/orders/dead/replay", `{"all": true, "tenant": 7}`, nil, 400, codeBadRequest, "body"},
		{"POST", "/api/orders/dead/delete", `{"ids": ["` + s.placed + `"], "tenant": "acme"}`, nil, 400, codeBadRequest, "delete takes ids only"},
		{"POST", "/api/orders/dead/delete", `{"all": true}`, nil, 400, codeBadRequest, "delete takes ids only"},
		{"POST", "/api/orders/dead/delete", `{"ids": [], "type": "OrderPlaced"}`, nil, 400, codeBadRequest, "delete takes ids only"},
		{"POST", "/api/orders/dead/replay", `{"ids": ["` + strings.Repeat("a", maxBody) + `"]}`, nil, 413, codeTooLarge, "larger than"},
		{"DELETE", "/api/orders/dead/" + long, "", nil, 400, codeBadRequest, "not an event id"},
		// CSRF defences: a form's content types, none at all, another site.
		{"POST", "/api/orders/dead/replay", "ids=" + s.placed, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, codeNotJSON, "Content-Type: application/json"},
		{"POST", "/api/orders/dead/replay", idsBody(s.placed), []string{"Content-Type", "text/plain"}, 415, codeNotJSON, "CSRF"},
		{"POST", "/api/orders/dead/" + s.placed + "/replay", "", []string{"Content-Type", ""}, 415, codeNotJSON, "CSRF"},
		{"DELETE", "/api/orders/dead/" + s.placed, "", []string{"Content-Type", "multipart/form-data; boundary=x"}, 415, codeNotJSON, "CSRF"},
		{"POST", "/api/orders/dead/replay", idsBody(s.placed), []string{"Sec-Fetch-Site", "cross-site"}, 403, codeCrossOrigin, "cross-origin"},
		{"DELETE", "/api/orders/dead/" + s.placed, "", []string{"Sec-Fetch-Site", "same-site"}, 403, codeCrossOrigin, "cross-origin"},
		{"POST", "/api/orders/dead/delete", idsBody(s.placed), []string{"Origin", "https://evil.example"}, 403, codeCrossOrigin, "cross-origin"},
	} {
		t.Run(c.method+" "+strings.ReplaceAll(c.path, "/", "_")[:min(len(c.path), 60)], func(t *testing.T) {
			e.req(c.method, c.path, c.body, c.hdr...).wantError(t, c.status, c.code, c.msg)
		})
	}
	e.wantUnchanged(before)
	// A request of the page's own origin passes the checks.
	var c changeJSON
	e.req("POST", "/api/orders/dead/"+s.placed+"/replay", "", "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json; charset=utf-8").
		want(t, http.StatusOK, &c)
}

func TestReadOnly(t *testing.T) {
	e := newEnv(t, sqlite(t), func(c *Config) { c.Authorize = nil; c.Title = "orders outbox" })
	s := e.seed()
	before := e.snapshot()
	if !e.h.ReadOnly() {
		t.Error("ReadOnly() is false without an authorizer")
	}
	var info infoJSON
	e.req("GET", "/api", "").want(t, http.StatusOK, &info)
	if !info.ReadOnly || info.Authorized || info.Title != "orders outbox" {
		t.Errorf("api: %+v", info)
	}
	for _, r := range [][3]string{
		{"POST", "/api/orders/dead/" + s.placed + "/replay", ""},
		{"POST", "/api/orders/dead/replay", idsBody(s.placed)},
		{"POST", "/api/orders/dead/replay", `{"all": true}`},
		{"DELETE", "/api/orders/dead/" + s.placed, ""},
		{"POST", "/api/orders/dead/delete", idsBody(s.placed)},
		{"POST", "/api/orders/dead/replay", "not even JSON"},
	} {
		e.req(r[0], r[1], r[2]).wantError(t, http.StatusForbidden, codeReadOnly, "read-only", "Config.Authorize")
	}
	e.wantUnchanged(before)
	// Reading works.
	var l listJSON
	e.req("GET", "/api/orders/dead", "").want(t, http.StatusOK, &l)
	if len(l.Events) != 4 {
		t.Errorf("dead: %d events", len(l.Events))
	}
}

func TestAuthorize(t *testing.T) {
	errNoToken := errors.New("the X-Admin-Token header is missing or wrong")
	e := newEnv(t, sqlite(t), func(c *Config) {
		c.Authorize = func(r *http.Request) error {
			if r.Header.Get("X-Admin-Token") != "s3cret" {
				return errNoToken
			}
			return nil
		}
	})
	s := e.seed()
	before := e.snapshot()
	var info infoJSON
	e.req("GET", "/api", "").want(t, http.StatusOK, &info)
	if info.ReadOnly || info.Authorized || info.AuthorizationError != errNoToken.Error() {
		t.Errorf("api without the token: %+v", info)
	}
	info = infoJSON{}
	e.req("GET", "/api", "", "X-Admin-Token", "s3cret").want(t, http.StatusOK, &info)
	if info.ReadOnly || !info.Authorized || info.AuthorizationError != "" {
		t.Errorf("api with the token: %+v", info)
	}
	e.req("POST", "/api/orders/dead/replay", idsBody(s.placed)).wantError(t, http.StatusForbidden, codeForbidden, "not authorized: "+errNoToken.Error())
	e.req("DELETE", "/api/orders/dead/"+s.placed, "", "X-Admin-Token", "guess").wantError(t, http.StatusForbidden, codeForbidden, "not authorized")
	// The CSRF checks come first: a forged request never reaches the authorizer.
	e.req("POST", "/api/orders/dead/replay", idsBody(s.placed), "X-Admin-Token", "s3cret", "Content-Type", "text/plain").
		wantError(t, http.StatusUnsupportedMediaType, codeNotJSON)
	e.wantUnchanged(before)
	var c changeJSON
	e.req("POST", "/api/orders/dead/replay", idsBody(s.placed), "X-Admin-Token", "s3cret").want(t, http.StatusOK, &c)
	if got := e.statuses(s.placed); got[0] != "NEW" {
		t.Errorf("replayed with the token: %q", got)
	}
}

// TestStoreErrors serves a table that does not exist and a database that
// cannot be reached: every endpoint answers 500 with a message that names
// neither the table nor the database, and the log has the cause.
func TestStoreErrors(t *testing.T) {
	outboxsqltest.Run(t, func(t *testing.T, b outboxsqltest.Backend) {
		const password = "pw-9f3c2b7d"
		t.Run("MissingTable", func(t *testing.T) {
			db := b.Open(t)
			table := outboxsqltest.TableName("outbox_missing")
			store, err := outboxsql.Open(db, outboxsql.WithDialect(b.Dialect), outboxsql.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			srv, log := serveStore(t, store, outboxsql.NewTxManager(db))
			checkStoreErrors(t, srv, log, table)
		})
		t.Run("Unreachable", func(t *testing.T) {
			dsn, secret := unreachableDSN(t, b, password)
			db, err := sql.Open(b.DriverName, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			store, err := outboxsql.Open(db, outboxsql.WithDialect(b.Dialect))
			if err != nil {
				t.Fatal(err)
			}
			srv, log := serveStore(t, store, outboxsql.NewTxManager(db))
			checkStoreErrors(t, srv, log, secret, dsn)
		})
	})
}

// unreachableDSN returns a DSN of b where no database answers, holding a
// password (servers) or a path (SQLite), and that secret.
func unreachableDSN(t *testing.T, b outboxsqltest.Backend, password string) (dsn, secret string) {
	t.Helper()
	switch b.Dialect.Name() {
	case "sqlite":
		dir := filepath.Join(t.TempDir(), "no-such-dir-"+password)
		return outboxsql.SQLiteDSN(filepath.Join(dir, "app.db")), dir
	case "postgres":
		// Port 1 of the loopback address: nothing listens there.
		return "postgres://admin:" + password + "@127.0.0.1:1/app?sslmode=disable&connect_timeout=5", password
	case "mysql":
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName, cfg.ParseTime = "admin", password, "tcp", "127.0.0.1:1", "app", true
		return cfg.FormatDSN(), password
	}
	t.Fatalf("no DSN for %s", b.Name)
	return "", ""
}

func serveStore(t *testing.T, store *outboxsql.Store, txm *outboxsql.TxManager) (*httptest.Server, *outboxtest.LogBuffer) {
	t.Helper()
	logger, log := outboxtest.NewLogBuffer()
	h, err := New(Config{
		Sources:   []Source{{Name: "orders", Client: newClient(t, store, txm), Events: store}},
		Authorize: allowAll,
		Logger:    logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, log
}

func checkStoreErrors(t *testing.T, srv *httptest.Server, log *outboxtest.LogBuffer, secrets ...string) {
	t.Helper()
	const id = "01JD5K3Q8V4N2M7XGZ6P1R9T0B"
	for _, r := range [][3]string{
		{"GET", "/api/orders/stats", ""},
		{"GET", "/api/orders/events?status=DEAD", ""},
		{"GET", "/api/orders/events/" + id, ""},
		{"GET", "/api/orders/dead", ""},
		{"POST", "/api/orders/dead/" + id + "/replay", ""},
		{"POST", "/api/orders/dead/replay", idsBody(id)},
		{"POST", "/api/orders/dead/replay", `{"all": true}`},
		{"DELETE", "/api/orders/dead/" + id, ""},
		{"POST", "/api/orders/dead/delete", idsBody(id)},
	} {
		resp := do(t, srv.URL, r[0], r[1], r[2])
		e := resp.wantError(t, http.StatusInternalServerError, codeInternal, "the outbox store failed")
		for _, s := range append(secrets, "127.0.0.1", "sql", "dial") {
			if strings.Contains(strings.ToLower(string(resp.body)), strings.ToLower(s)) {
				t.Errorf("%s %s: the error %q gives away %q", r[0], r[1], e.Error, s)
			}
		}
	}
	if !strings.Contains(log.String(), "outboxhttp: store error") || strings.Count(log.String(), "\n") < 9 {
		t.Errorf("the log does not have the causes:\n%s", log)
	}
}

func TestMount(t *testing.T) {
	e := newEnv(t, sqlite(t), nil)
	e.seed()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.Handle("/admin/outbox/", http.StripPrefix("/admin/outbox", e.h))
	// Mounted by its exact path too, as some routers do.
	mux.Handle("/ops/outbox", http.StripPrefix("/ops/outbox", e.h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	get := func(path string, status int) response {
		t.Helper()
		return do(t, srv.URL, "GET", path, "").want(t, status, nil)
	}

	page := get("/admin/outbox/", http.StatusOK)
	if ct := page.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("page Content-Type %q", ct)
	}
	for _, want := range []string{`src="assets/app.js"`, `href="assets/app.css"`} {
		if !strings.Contains(string(page.body), want) {
			t.Errorf("the page has no %s (relative links work under any prefix)", want)
		}
	}
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("page CSP %q", csp)
	}
	if js := get("/admin/outbox/assets/app.js", http.StatusOK); !strings.Contains(js.header.Get("Content-Type"), "javascript") || len(js.body) == 0 {
		t.Errorf("app.js: %q, %d bytes", js.header.Get("Content-Type"), len(js.body))
	}
	if css := get("/admin/outbox/assets/app.css", http.StatusOK); !strings.HasPrefix(css.header.Get("Content-Type"), "text/css") {
		t.Errorf("app.css: %q", css.header.Get("Content-Type"))
	}
	get("/admin/outbox/assets/", http.StatusNotFound) // no listing
	get("/admin/outbox/assets/index.html", http.StatusNotFound)
	get("/admin/outbox/other", http.StatusNotFound)
	var st statsJSON
	do(t, srv.URL, "GET", "/admin/outbox/api/orders/stats", "").want(t, http.StatusOK, &st)
	if st.Total != 9 {
		t.Errorf("stats under the prefix: %+v", st)
	}
	if r := get("/healthz", http.StatusOK); string(r.body) != "ok" {
		t.Errorf("the router's own route: %q", r.body)
	}
	// Without the trailing slash: to the page, relatively.
	for path, want := range map[string]string{
		"/admin/outbox":        "/admin/outbox/",
		"/ops/outbox":          "/ops/outbox/",
		"/ops/outbox?source=x": "/ops/outbox/?source=x",
	} {
		r := do(t, srv.URL, "GET", path, "")
		if r.status != http.StatusTemporaryRedirect && r.status != http.StatusMovedPermanently {
			t.Errorf("GET %s: status %d, want a redirect", path, r.status)
		}
		base, _ := url.Parse(srv.URL + path)
		loc, err := base.Parse(r.header.Get("Location"))
		if err != nil || loc.RequestURI() != want {
			t.Errorf("GET %s: redirect to %q (%v), want %s", path, r.header.Get("Location"), err, want)
		}
	}
	do(t, srv.URL, "POST", "/admin/outbox/", "{}").want(t, http.StatusMethodNotAllowed, nil)
}

func TestSources(t *testing.T) {
	b := sqlite(t)
	e := newEnv(t, b, nil)
	e.seed()
	billing := b.NewStore(t, e.db)
	billingClient := newClient(t, billing, e.txm)
	writeEvents(t, billingClient, e.txm, outbox.MustEnvelope(outbox.EventName("InvoiceSent"), outbox.WithJSON([]byte(`{}`))))
	h, err := New(Config{Sources: []Source{
		{Name: "orders", Client: e.client, Events: e.store},
		{Name: "billing-eu.v2", Client: billingClient, Events: billing},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	var info infoJSON
	do(t, srv.URL, "GET", "/api/", "").want(t, http.StatusOK, &info)
	if len(info.Sources) != 2 || info.Sources[0].Name != "orders" || info.Sources[1].Name != "billing-eu.v2" {
		t.Errorf("sources: %+v", info.Sources)
	}
	for name, total := range map[string]int64{"orders": 9, "billing-eu.v2": 1} {
		var st statsJSON
		do(t, srv.URL, "GET", "/api/"+name+"/stats", "").want(t, http.StatusOK, &st)
		if st.Source != name || st.Total != total {
			t.Errorf("stats of %s: %+v", name, st)
		}
	}
}

func TestNewValidates(t *testing.T) {
	e := newEnv(t, sqlite(t), nil)
	ok := Source{Name: "orders", Client: e.client, Events: e.store}
	for name, cfg := range map[string]Config{
		"no sources":     {},
		"empty name":     {Sources: []Source{{Client: e.client, Events: e.store}}},
		"name with /":    {Sources: []Source{{Name: "a/b", Client: e.client, Events: e.store}}},
		"name with dot":  {Sources: []Source{{Name: ".hidden", Client: e.client, Events: e.store}}},
		"long name":      {Sources: []Source{{Name: strings.Repeat("a", 65), Client: e.client, Events: e.store}}},
		"duplicate name": {Sources: []Source{ok, ok}},
		"no client":      {Sources: []Source{{Name: "orders", Events: e.store}}},
		"no events":      {Sources: []Source{{Name: "orders", Client: e.client}}},
	} {
		if _, err := New(cfg); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := New(Config{Sources: []Source{ok}}); err != nil {
		t.Errorf("a valid config: %v", err)
	}
}

// TestUndecodableEvent shows a row whose headers cannot be decoded with
// what is known of it, in the lists and alone.
func TestUndecodableEvent(t *testing.T) {
	e := newEnv(t, sqlite(t), nil)
	s := e.seed()
	if _, err := e.db.ExecContext(context.Background(), fmt.Sprintf("UPDATE %s SET headers = 'not json' WHERE event_id = ?", e.store.Table()), s.cancelled); err != nil {
		t.Fatal(err)
	}
	var l listJSON
	e.req("GET", "/api/orders/dead?aggregate=", "").want(t, http.StatusOK, &l)
	var ev eventJSON
	e.req("GET", "/api/orders/events/"+s.cancelled, "").want(t, http.StatusOK, &ev)
	for _, got := range append(l.Events, ev) {
		if got.ID == s.cancelled && (got.DecodeError == "" || got.Type != "" || got.Status != "DEAD" || got.Payload != nil) {
			t.Errorf("undecodable event: %+v", got)
		}
	}
	if len(l.Events) != 4 {
		t.Errorf("dead: %d events", len(l.Events))
	}
	var c changeJSON
	e.req("POST", "/api/orders/dead/"+s.cancelled+"/replay", "").want(t, http.StatusOK, &c)
}

package outbox

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// manyHeaders returns n headers h0..h(n-1) with value v.
func manyHeaders(n int, v string) map[string]string {
	h := make(map[string]string, n)
	for i := range n {
		h["h"+strconv.Itoa(i)] = v
	}
	return h
}

// headerAttacks are header sets an Envelope must refuse, each with the
// words its error must say.
var headerAttacks = []struct {
	name    string
	headers map[string]string
	want    string
}{
	{"one header too many", manyHeaders(MaxHeaders+1, "v"), "65 headers; the limit is MaxHeaders (64)"},
	{"a thousand headers", manyHeaders(1000, ""), "1000 headers; the limit is MaxHeaders (64)"},
	{"header name one byte too long", map[string]string{strings.Repeat("n", MaxHeaderNameLen+1): "v"}, "256 bytes"},
	{"header name of a megabyte", map[string]string{strings.Repeat("n", 1<<20): "v"}, "the limit is MaxHeaderNameLen (255)"},
	{"one value over the total", map[string]string{"k": strings.Repeat("v", MaxHeadersSize)}, "65537 bytes (names and values); the limit is MaxHeadersSize (65536)"},
	{"a 20 MiB value", map[string]string{"k": strings.Repeat("v", 20<<20)}, "20971521 bytes"},
	{"many values over the total", manyHeaders(MaxHeaders, strings.Repeat("v", MaxHeadersSize/MaxHeaders)), "the limit is MaxHeadersSize"},
	{"empty name", map[string]string{"": "v"}, "empty"},
	{"invalid UTF-8 name", map[string]string{"k\xff": "v"}, "not valid UTF-8"},
	{"NUL in a value", map[string]string{"k": "a\x00b"}, "not valid UTF-8 text (or contains NUL)"},
}

// tenantAttacks are tenant ids a write must refuse.
var tenantAttacks = []struct{ name, id, want string }{
	{"leading space", " acme", "white space"},
	{"trailing space", "acme ", "white space"},
	{"trailing tab", "acme\t", "control character"},
	{"trailing no-break space", "acme\u00a0", "white space"},
	{"leading ideographic space", "\u3000acme", "white space"},
	{"newline inside", "ac\nme", "control character"},
	{"NUL", "acme\x00", "control character"},
	{"escape sequence", "\x1b[2Jacme", "control character"},
	{"C1 control", "ac\u0085me", "control character"},
	{"DEL", "acme\x7f", "control character"},
	{"invalid UTF-8", "acme\xff", "not valid UTF-8"},
	{"too long", strings.Repeat("t", MaxTenantIDLen+1), "65 bytes long; the limit is MaxTenantIDLen (64)"},
}

func TestEnvelopeHeaderLimits(t *testing.T) {
	for _, tc := range headerAttacks {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithHeaders(tc.headers))
			if !errors.Is(err, ErrInvalidEnvelope) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewEnvelope: %.300v; want ErrInvalidEnvelope saying %q", err, tc.want)
			} else if len(err.Error()) > 500 {
				t.Errorf("the error repeats the value: %d bytes", len(err.Error()))
			}
			base := MustEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithHeader("present", "1"))
			if _, err := base.WithAddedHeaders(tc.headers, false); !errors.Is(err, ErrInvalidEnvelope) {
				t.Errorf("WithAddedHeaders: %v; want ErrInvalidEnvelope", err)
			}
		})
	}
	// At the limits, an envelope is accepted.
	at := manyHeaders(MaxHeaders-1, "")
	at[strings.Repeat("n", MaxHeaderNameLen)] = ""
	size := MaxHeaderNameLen
	for k := range at {
		if len(k) < MaxHeaderNameLen {
			size += len(k)
		}
	}
	at["h0"] = strings.Repeat("v", MaxHeadersSize-size)
	if _, err := NewEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithHeaders(at)); err != nil {
		t.Errorf("headers at every limit refused: %v", err)
	}
}

func TestEnvelopeTenantIDs(t *testing.T) {
	for _, tc := range tenantAttacks {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithTenant(tc.id))
			if !errors.Is(err, ErrInvalidEnvelope) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewEnvelope(WithTenant(%q)): %v; want ErrInvalidEnvelope saying %q", tc.id, err, tc.want)
			}
		})
	}
	for _, id := range []string{"acme", "acme corp", "ünïcode-テナント", strings.Repeat("t", MaxTenantIDLen)} {
		if _, err := NewEnvelope(EventName("E"), WithJSON([]byte(`{}`)), WithTenant(id)); err != nil {
			t.Errorf("tenant %q refused: %v", id, err)
		}
	}
}

// An envelope made without NewEnvelope (RestoreEnvelope), or by a
// BeforeWrite hook, is checked by the write: it fails before the store is
// called, alone, and the transaction goes on.
func TestWriteRefusesEnvelopesOutsideTheLimits(t *testing.T) {
	bigHeader := restored(t, map[string]string{"k": strings.Repeat("v", 20<<20)}, "")
	badTenant := restored(t, nil, "acme ")
	for _, tc := range []struct {
		name  string
		write []Envelope
		hook  WriterHook
	}{
		{"restored, 20 MiB header", []Envelope{bigHeader}, nil},
		{"restored, tenant with a trailing space", []Envelope{badTenant}, nil},
		{"hook adds a 20 MiB header", []Envelope{evt("E")}, replaceHook{bigHeader}},
		{"hook sets a bad tenant", []Envelope{evt("E")}, replaceHook{badTenant}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				if tc.hook != nil {
					c.Hooks = []WriterHook{tc.hook}
				}
			})
			ctx, tx := withTx(context.Background())
			before := h.st.callCount("Insert")
			if _, err := h.w.Write(ctx, tc.write...); !errors.Is(err, ErrInvalidEnvelope) {
				t.Fatalf("Write: %v; want ErrInvalidEnvelope", err)
			}
			if h.st.callCount("Insert") != before {
				t.Error("the store was called with an envelope the write refuses")
			}
			if tc.hook == nil {
				ok := evt("E")
				if _, err := h.w.Write(ctx, ok); err != nil {
					t.Fatalf("the next write in the same transaction: %v", err)
				}
				tx.Commit()
				if h.st.get(ok.ID()).ID != ok.ID() {
					t.Error("the good event of the transaction is not stored")
				}
			}
		})
	}
}

// replaceHook replaces every write with its events.
type replaceHook struct{ with Envelope }

func (r replaceHook) BeforeWrite(context.Context, []Envelope) ([]Envelope, error) {
	return []Envelope{r.with}, nil
}
func (replaceHook) AfterWrite(context.Context, []Envelope) {}
func (replaceHook) AfterCommit([]Envelope)                 {}
func (replaceHook) AfterRollback([]Envelope)               {}

// restored makes an envelope with RestoreEnvelope, which checks no limit.
func restored(t *testing.T, headers map[string]string, tenant string) Envelope {
	t.Helper()
	e, err := RestoreEnvelope(EnvelopeFields{ID: NewULID(), Type: "E", Headers: headers, TenantID: tenant, Payload: "{}", Kind: PayloadJSON})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

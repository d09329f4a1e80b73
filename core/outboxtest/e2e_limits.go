package outboxtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// RunLimitsSuite checks, against a backend, that what a database would
// refuse or store too large never reaches it: an envelope outside the
// limits fails its write alone, before the database, and the transaction
// goes on; a listener error that the database could not store (NUL,
// invalid UTF-8, control characters) is stored cleaned, at its first
// failure. newFixture must return a fixture on its own empty table.
func RunLimitsSuite(t *testing.T, newFixture func(t *testing.T) Fixture) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, f Fixture)
	}{
		{"OversizeHeaderFailsAloneBeforeTheDatabase", limitsOversizeHeader},
		{"UnstorableListenerErrorIsStoredCleaned", limitsUnstorableError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newFixture(t))
		})
	}
}

// limitsOversizeHeader writes an event with a 20 MiB header (made with
// RestoreEnvelope, as a hook or a relay could: NewEnvelope refuses it) and
// one with a tenant id ending in a space, then a good event in the same
// transaction, and commits: the bad writes fail with ErrInvalidEnvelope,
// the good event is stored.
func limitsOversizeHeader(t *testing.T, f Fixture) {
	c := newClient(t, f, outbox.Config{Mode: outbox.ModeWriterOnly})
	huge := map[string]string{"trace": strings.Repeat("x", 20<<20)}
	if _, err := outbox.NewEnvelope(evtPing, outbox.WithJSON([]byte(`{}`)), outbox.WithHeaders(huge)); !errors.Is(err, outbox.ErrInvalidEnvelope) {
		t.Errorf("NewEnvelope with a 20 MiB header: %.200v; want ErrInvalidEnvelope", err)
	}
	restore := func(headers map[string]string, tenant string) outbox.Envelope {
		e, err := outbox.RestoreEnvelope(outbox.EnvelopeFields{ID: outbox.NewULID(), Type: evtPing.Name(), Headers: headers,
			TenantID: tenant, Payload: `{}`, Kind: outbox.PayloadJSON})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	bad := []outbox.Envelope{restore(huge, ""), restore(nil, "acme ")}
	good := ping(t)
	err := f.InTx(context.Background(), func(ctx context.Context) error {
		for _, e := range bad {
			if _, err := c.Write(ctx, e); !errors.Is(err, outbox.ErrInvalidEnvelope) {
				return errors.New("write of an envelope outside the limits: " + clipErr(err) + "; want ErrInvalidEnvelope")
			}
		}
		_, err := c.Write(ctx, good)
		return err
	})
	if err != nil {
		t.Fatalf("transaction: %v", err)
	}
	if r := record(t, f, good.ID()); r.Status != outbox.StatusNew {
		t.Errorf("good event: %s; want it stored NEW", r.Status)
	}
	for _, e := range bad {
		if _, err := f.Store.Get(context.Background(), e.ID()); !errors.Is(err, outbox.ErrNotFound) {
			t.Errorf("refused event %s: %v; want it not stored", e.ID(), err)
		}
	}
}

func clipErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// limitsUnstorableError: a listener fails with text that PostgreSQL (NUL)
// or MySQL (invalid UTF-8) would refuse; its first failure is stored,
// cleaned, as a RETRY.
func limitsUnstorableError(t *testing.T, f Fixture) {
	failure := "downstream said \x00\xff\xfe\x1b[31m no\r\n\tthe end"
	want := `downstream said \x00` + "\uFFFD" + `\x1b[31m no\x0d` + "\n\tthe end"
	c := startNode(t, f, outbox.ListenerFunc(func(context.Context, outbox.Envelope) error { return errors.New(failure) }),
		outbox.Config{RetryPolicy: outbox.RetryPolicyFunc(func(int) time.Duration { return time.Hour })})
	e := ping(t)
	write(t, f, c, e)
	Eventually(t, 10*time.Second, "the failure stored", func() bool {
		r := record(t, f, e.ID())
		return r.Status == outbox.StatusRetry && r.LockedBy == ""
	})
	if r := record(t, f, e.ID()); r.LastError != want || r.Attempts != 1 {
		t.Errorf("stored %q after %d attempts; want %q after 1", r.LastError, r.Attempts, want)
	}
}

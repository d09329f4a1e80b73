package outboxpgx_test

import (
	"testing"

	"github.com/go-outbox/outbox/core/inbox/inboxtest"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// TestInboxSuite runs the consumer inbox on pgx, in both transaction styles.
func TestInboxSuite(t *testing.T) {
	for _, st := range []style{styleInTx, styleBegin} {
		t.Run(st.String(), func(t *testing.T) {
			pool := newPool(t, defaultSession)
			inboxtest.RunSuite(t, func(t *testing.T) outboxtest.AdapterFixture { return newFixture(t, pool, st) })
		})
	}
}

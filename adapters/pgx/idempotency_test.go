package outboxpgx_test

import (
	"testing"

	"github.com/go-outbox/outbox/core/idempotency/idempotencytest"
	"github.com/go-outbox/outbox/core/outboxtest"
)

// TestIdempotencySuite runs the idempotency keys on pgx, in both
// transaction styles.
func TestIdempotencySuite(t *testing.T) {
	for _, st := range []style{styleInTx, styleBegin} {
		t.Run(st.String(), func(t *testing.T) {
			pool := newPool(t, defaultSession)
			idempotencytest.RunSuite(t, func(t *testing.T) outboxtest.AdapterFixture { return newFixture(t, pool, st) })
		})
	}
}

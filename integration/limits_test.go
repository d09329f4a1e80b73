package integration

import (
	"testing"

	"github.com/go-outbox/outbox/core/outboxtest"
)

func TestLimitsSuite(t *testing.T) {
	forEachBackend(t, outboxtest.RunLimitsSuite)
}

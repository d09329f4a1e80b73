package relaytest

import (
	"context"
	"net"
	"os"
	"testing"
	"time"
)

// EnvRequireBrokers names the environment variable that turns a missing
// broker from a skip into a failure: CI sets it to 1.
const EnvRequireBrokers = "OUTBOX_TEST_REQUIRE_BROKERS"

// BrokersRequired reports whether OUTBOX_TEST_REQUIRE_BROKERS=1.
func BrokersRequired() bool { return os.Getenv(EnvRequireBrokers) == "1" }

// Unavailable ends a test that needs a broker it cannot use: it skips the
// test with what (the broker and where it was looked for) and err as the
// reason, or fails it under OUTBOX_TEST_REQUIRE_BROKERS=1.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if BrokersRequired() {
		t.Fatalf("%s is not available (%s=1): %v", what, EnvRequireBrokers, err)
	}
	t.Skipf("%s is not available: %v (set %s=1 to fail instead)", what, err, EnvRequireBrokers)
}

// RequireTCP calls Unavailable unless something accepts TCP connections
// at addr; what names the broker in the message, such as "RabbitMQ".
func RequireTCP(t testing.TB, what, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		Unavailable(t, what+" on "+addr, err)
		return
	}
	_ = c.Close()
}

package outboxhttp

import (
	"context"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
)

// bloatedStore is a store that reports the horizon of a bloated
// PostgreSQL table, whatever its database: a session idle in transaction
// for 47 minutes, whose application name is hostile, and a slot.
type bloatedStore struct{ *outboxsql.Store }

const hostileApp = `<img src=x onerror=alert(1)>`

func (bloatedStore) Horizon(context.Context) (outbox.Horizon, error) {
	return outbox.Horizon{DeadTuples: 2_364_118, LiveTuples: 120_406, TableSize: 159 << 20,
		LastAutovacuum: time.Now().Add(-52 * time.Minute).UTC(),
		Holders: []outbox.HorizonHolder{
			{Kind: outbox.HolderTransaction, PID: 48213, Name: hostileApp, State: "idle in transaction", Age: 47 * time.Minute, XIDAge: 3_912_554},
			{Kind: outbox.HolderSlot, Name: "standby_b", State: "inactive", XIDAge: 1_204},
		}}, nil
}

// bloatedConfig are thresholds the bloatedStore passes, each.
var bloatedConfig = outbox.Config{HorizonDeadTuples: 1_000_000, HorizonTableMegabytes: 100}

// The horizon guard's report in the health and the stats of a source:
// its warnings, figures and holders, the database's text as it is.
func TestHorizonAPI(t *testing.T) {
	e := newEnv(t, sqlite(t), nil)
	cfg := bloatedConfig
	cfg.Store, cfg.TxContext, cfg.Mode = bloatedStore{e.store}, e.txm, outbox.ModeWriterOnly
	c, err := outbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	h, err := New(Config{Sources: []Source{{Name: "orders", Client: c, Events: e.store}}})
	if err != nil {
		t.Fatal(err)
	}
	base := mount(t, h)
	var hl healthJSON
	do(t, base, "GET", "api/orders/health", "").want(t, 200, &hl)
	hz := hl.Horizon
	if hz == nil || len(hz.Warnings) != 3 || hz.DeadTuples != 2_364_118 || hz.TableBytes != 159<<20 || len(hz.Holders) != 2 {
		t.Fatalf("health's horizon: %+v", hz)
	}
	if ho := hz.Holders[0]; ho.Kind != "transaction" || ho.PID != 48213 || ho.Name != hostileApp || ho.AgeSeconds != 47*60 {
		t.Errorf("oldest holder %+v", ho)
	}
	if msg := hz.Warnings[1].Message; hz.Warnings[1].Check != "holder_age" || !strings.Contains(msg, "pid 48213") || !strings.Contains(msg, hostileApp) {
		t.Errorf("holder warning %+v", hz.Warnings[1])
	}
	var st statsJSON
	do(t, base, "GET", "api/orders/stats", "").want(t, 200, &st)
	if st.Horizon == nil || len(st.Horizon.Warnings) != 3 {
		t.Errorf("stats' horizon: %+v", st.Horizon)
	}
	// A source whose store has no horizon (SQLite) has none in its answers.
	var plain healthJSON
	e.req("GET", "/api/orders/health", "").want(t, 200, &plain)
	if plain.Horizon != nil {
		t.Errorf("horizon of a SQLite source: %+v", plain.Horizon)
	}
}

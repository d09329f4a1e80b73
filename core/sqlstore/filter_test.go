package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// TestClaimTypesBounded: a claim whose Types or SkipTypes hold more than
// MaxClaimTypes distinct types fails with an error wrapping
// outbox.ErrInvalidConfig before any SQL runs; duplicates do not count; an
// empty Types, or one all skipped, claims nothing without SQL either.
func TestClaimTypesBounded(t *testing.T) {
	many := make([]string, MaxClaimTypes+1)
	for i := range many {
		many[i] = fmt.Sprintf("T%d", i)
	}
	same := make([]string, MaxClaimTypes+1)
	for i := range same {
		same[i] = "T"
	}
	for _, d := range []Dialect{PostgreSQL, MySQL, SQLite} {
		s, err := New(noDB{}, WithDialect(d))
		if err != nil {
			t.Fatal(err)
		}
		base := outbox.ClaimRequest{Owner: "o", Now: time.Now(), Lease: time.Minute, Limit: 10}
		for _, tc := range []struct {
			what        string
			types, skip []string
			want        error
		}{
			{"too many types", many, nil, outbox.ErrInvalidConfig},
			{"too many skipped", nil, many, outbox.ErrInvalidConfig},
			{"one type, repeated", same, nil, errNoDB},
			{"MaxClaimTypes types", many[:MaxClaimTypes], nil, errNoDB},
			{"empty Types", []string{}, nil, nil},
			{"Types all skipped", []string{"A", "B"}, []string{"B", "A"}, nil},
		} {
			req := base
			req.Types, req.SkipTypes = tc.types, tc.skip
			recs, err := s.Claim(context.Background(), req)
			if !errors.Is(err, tc.want) || tc.want == nil && err != nil || len(recs) != 0 {
				t.Errorf("%s: %s: claim = %d records, %v; want %v", d.Name(), tc.what, len(recs), err, tc.want)
			}
			if errors.Is(tc.want, outbox.ErrInvalidConfig) && !strings.Contains(fmt.Sprint(err), "MaxClaimTypes") {
				t.Errorf("%s: %s: %v does not name the bound", d.Name(), tc.what, err)
			}
		}
	}
}

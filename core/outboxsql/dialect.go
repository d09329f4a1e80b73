package outboxsql

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
)

// Dialect is the SQL flavour of one database family. The package provides
// one value per supported database (SQLite); it cannot be implemented
// outside this package. Use DetectDialect or Open to pick one from a
// *sql.DB, or pass one to New explicitly.
type Dialect interface {
	// Name returns the dialect's short name, such as "sqlite".
	Name() string
	spec() *dialect
}

// dialect is what a database family provides. A new dialect is one file
// declaring one *dialect value, registering it in init, plus its DDL in
// schema/<name>.sql; everything else is shared.
type dialect struct {
	name string
	// drivers are the database/sql driver types this dialect serves, as
	// "<package path>.<type name>" of the driver's (dereferenced) type.
	drivers []string
	// schemaFile is the DDL template under schema/, see renderSchema.
	schemaFile string
	// placeholder returns the bind marker of the i-th parameter (1-based).
	placeholder func(i int) string
	// timeArg turns a UTC timestamp into a bind argument.
	timeArg func(t time.Time) any
	// scanTime turns a scanned column value (never nil) into a time.
	scanTime func(src any) (time.Time, error)
	// claimLock is appended to the claim's inner SELECT, for example
	// " FOR UPDATE SKIP LOCKED".
	claimLock string
	// claim, when set, replaces the shared single-statement claim
	// (UPDATE … WHERE event_id IN (SELECT … LIMIT n) RETURNING …), for
	// databases that need several statements.
	claim func(ctx context.Context, s *Store, ex outbox.Executor, req outbox.ClaimRequest) ([]outbox.Record, error)
	// purgeSQL, when set, replaces the shared purge statement
	// (DELETE … WHERE event_id IN (SELECT … LIMIT n)). It receives the
	// table name and must bind the cutoff, then the limit.
	purgeSQL func(table string) string
	// idsFrom, when set, replaces "event_id IN (<sub>)", the condition by
	// which the shared claim and purge find the rows their subquery sub
	// selects.
	idsFrom func(sub string) string
	// missingTable reports whether err says that the table does not exist.
	missingTable func(err error) bool
	// maxBatch caps rows per multi-row INSERT and ids per IN list.
	maxBatch int
}

func (d *dialect) Name() string   { return d.name }
func (d *dialect) spec() *dialect { return d }
func (d *dialect) String() string { return d.name }

// inSubquery returns the condition "event_id is one of the ids sub selects".
func (d *dialect) inSubquery(sub string) string {
	if d.idsFrom != nil {
		return d.idsFrom(sub)
	}
	return "event_id IN (" + sub + ")"
}

// dialects is every dialect compiled in, for DetectDialect.
var dialects []*dialect

func register(d *dialect) { dialects = append(dialects, d) }

// questionMark is the placeholder of SQLite and MySQL.
func questionMark(int) string { return "?" }

// dollar is the placeholder of PostgreSQL.
func dollar(i int) string { return "$" + strconv.Itoa(i) }

// Rebind rewrites the ? placeholders of query into d's style ($1, $2, …
// on PostgreSQL; unchanged elsewhere), so application SQL can be written
// once for every database. query must not contain a literal question mark.
func Rebind(d Dialect, query string) string {
	if d == nil {
		return query
	}
	return d.spec().rebind(query, 1)
}

// rebind replaces every ? in query with d's placeholders numbered from
// first. The shared SQL never contains a literal question mark.
func (d *dialect) rebind(query string, first int) string {
	if d.placeholder(1) == "?" {
		return query
	}
	var b strings.Builder
	n := first
	for _, r := range query {
		if r == '?' {
			b.WriteString(d.placeholder(n))
			n++
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// driverName returns "<package path>.<type name>" of db's driver.
func driverName(db *sql.DB) string {
	t := reflect.TypeOf(db.Driver())
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() + "." + t.Name()
}

// DetectDialect picks the Dialect for db from the type of its driver,
// without importing any driver: modernc.org/sqlite is SQLite. For another
// driver it returns an error wrapping outbox.ErrInvalidConfig; pass a Dialect
// to New explicitly then.
func DetectDialect(db *sql.DB) (Dialect, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: outboxsql: nil *sql.DB", outbox.ErrInvalidConfig)
	}
	name := driverName(db)
	for _, d := range dialects {
		for _, drv := range d.drivers {
			if drv == name {
				return d, nil
			}
		}
	}
	known := make([]string, 0, len(dialects))
	for _, d := range dialects {
		known = append(known, d.name+" ("+strings.Join(d.drivers, ", ")+")")
	}
	return nil, fmt.Errorf("%w: outboxsql: cannot detect the SQL dialect of driver %s; known drivers: %s; pass a dialect explicitly with outboxsql.New(outboxsql.<Dialect>, ...)",
		outbox.ErrInvalidConfig, name, strings.Join(known, "; "))
}

// timeCol scans a nullable timestamp column with a dialect's decoder. It
// never fails the scan: a bad value is kept in err so that one corrupt row
// does not fail a whole claim.
type timeCol struct {
	d   *dialect
	t   time.Time
	err error
}

func (c *timeCol) Scan(src any) error {
	c.t, c.err = time.Time{}, nil
	if src == nil {
		return nil
	}
	t, err := c.d.scanTime(src)
	if err != nil {
		c.err = err
		return nil
	}
	c.t = t.UTC()
	return nil
}

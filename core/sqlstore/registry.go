package sqlstore

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"

	outbox "github.com/go-outbox/outbox/core"
)

// The registry: every dialect, and how a database is recognised as one of
// them — by name, by the type of its database/sql driver, by the scheme of
// its URL. Code outside this package asks it instead of keeping a list; a
// new dialect is one more entry in registry.

// registry is every dialect, in the order Dialects returns them.
var registry = []*dialect{postgresDialect, mysqlDialect, sqliteDialect}

// Dialects returns every dialect: PostgreSQL, MySQL, SQLite.
func Dialects() []Dialect {
	out := make([]Dialect, len(registry))
	for i, d := range registry {
		out[i] = d
	}
	return out
}

// LookupDialect returns the dialect called name, in any case: a dialect's
// Name, another name of its database family ("postgresql", "pg",
// "mariadb", "tidb", "sqlite3"), or the name under which a database/sql
// driver of it registers ("pgx", "postgres", "mysql", "sqlite", …). The
// dialector names of GORM, bun's dialect names and the driver names sqlx
// is given all resolve. Another name returns an error wrapping
// outbox.ErrInvalidConfig that lists the known ones.
func LookupDialect(name string) (Dialect, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	for _, d := range registry {
		if key == d.name || slices.Contains(d.aliases, key) || slices.Contains(d.driverNames, key) {
			return d, nil
		}
	}
	var known []string
	for _, d := range registry {
		known = append(known, d.name)
		known = append(known, d.aliases...)
		known = append(known, d.driverNames...)
	}
	return nil, fmt.Errorf("%w: sqlstore: unknown dialect or driver name %q (known: %s)",
		outbox.ErrInvalidConfig, name, strings.Join(known, ", "))
}

// DriverDialect returns the dialect of a database/sql driver, such as
// db.Driver() of a *sql.DB, from its type: lib/pq and pgx's stdlib are
// PostgreSQL, go-sql-driver/mysql is MySQL, modernc.org/sqlite and
// mattn/go-sqlite3 are SQLite. No driver is imported. For another driver
// it returns an error wrapping outbox.ErrInvalidConfig that names the
// driver's type.
func DriverDialect(drv any) (Dialect, error) {
	name := "<nil>"
	if drv != nil {
		t := reflect.TypeOf(drv)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		name = t.PkgPath() + "." + t.Name()
		for _, d := range registry {
			if slices.Contains(d.driverTypes, name) {
				return d, nil
			}
		}
	}
	var known []string
	for _, d := range registry {
		known = append(known, d.driverTypes...)
	}
	return nil, fmt.Errorf("%w: sqlstore: cannot tell the SQL dialect of driver %s (known: %s)",
		outbox.ErrInvalidConfig, name, strings.Join(known, ", "))
}

// Source is a database named by a URL or a driver's DSN, ready for
// sql.Open(Driver, DSN) once the application imports the driver.
type Source struct {
	// Dialect is the database's dialect.
	Dialect Dialect
	// Driver is the name the database/sql driver registers: "pgx"
	// (github.com/jackc/pgx/v5/stdlib), "mysql"
	// (github.com/go-sql-driver/mysql) or "sqlite" (modernc.org/sqlite).
	Driver string
	// DSN is the driver's data source name.
	DSN string
	// Display names the database in messages, its password masked.
	Display string
	// Path is the database file of an embedded database, "" otherwise.
	Path string
}

// ErrUnknownScheme is matched by the error of ParseURL for a URL whose
// scheme no dialect has: the value may be something else than a URL.
var ErrUnknownScheme = errors.New("sqlstore: unknown database URL scheme")

// URLError says why a database URL or DSN cannot be used. It wraps
// outbox.ErrInvalidConfig (and ErrUnknownScheme for a scheme no dialect
// has) and never holds a password.
type URLError struct {
	// Reason says what is wrong and how to write it instead.
	Reason        string
	unknownScheme bool
}

// Error returns the reason, prefixed with the package name.
func (e *URLError) Error() string { return "sqlstore: " + e.Reason }

// Unwrap makes the error match outbox.ErrInvalidConfig, and
// ErrUnknownScheme when that is what is wrong.
func (e *URLError) Unwrap() []error {
	if e.unknownScheme {
		return []error{outbox.ErrInvalidConfig, ErrUnknownScheme}
	}
	return []error{outbox.ErrInvalidConfig}
}

// urlErr returns a *URLError of the formatted reason.
func urlErr(format string, args ...any) error {
	return &URLError{Reason: fmt.Sprintf(format, args...)}
}

// URLForms returns the beginnings of the URLs ParseURL accepts, one per
// scheme: "postgres://", "postgresql://", "mysql://", "sqlite:", ….
func URLForms() []string {
	var s []string
	for _, d := range registry {
		for _, sc := range d.schemes {
			s = append(s, sc+d.schemeSep)
		}
	}
	return s
}

// joinOr joins words for a message: "a", "a or b", "a, b or c".
func joinOr(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// ParseURL maps a database URL, as given on a command line or in an
// environment variable, to a Source. It imports no driver.
//
//	postgres://user:pass@host:5432/db?sslmode=disable  → "pgx", the URL unchanged
//	postgresql://…                                    → the same
//	mysql://user:pass@host:3306/db?param=value         → "mysql", user:pass@tcp(host:3306)/db?param=value&parseTime=true
//	                                                     (the parameters are the driver's; parseTime=true unless set)
//	sqlite:path/app.db, sqlite:///abs/app.db, app.db   → "sqlite", SQLiteDSN(path)
//	file:app.db?_pragma=…                              → "sqlite", the DSN unchanged
//
// A value without a scheme is the path of a SQLite file. Errors are
// *URLError.
func ParseURL(raw string) (Source, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return Source{}, urlErr("empty database URL")
	}
	scheme, _, hasScheme := strings.Cut(raw, ":")
	if !hasScheme || len(scheme) == 1 { // a plain path (or a Windows drive letter)
		for _, d := range registry {
			if d.embedded {
				return d.fromURL(d, raw)
			}
		}
	}
	for _, d := range registry {
		if slices.Contains(d.schemes, strings.ToLower(scheme)) {
			return d.fromURL(d, raw)
		}
	}
	return Source{}, &URLError{Reason: fmt.Sprintf("unknown scheme %q: use %s", scheme, joinOr(URLForms())), unknownScheme: true}
}

// ParseDSN maps dsn, a URL of one of d's schemes or a DSN of d's default
// driver, to a Source: a PostgreSQL URL or key=value string, a
// go-sql-driver/mysql DSN, a SQLite file path or file: URI. It checks the
// DSN as ParseURL does. Errors are *URLError.
func ParseDSN(d Dialect, dsn string) (Source, error) {
	if d == nil {
		return Source{}, urlErr("no dialect for DSN")
	}
	spec := d.spec()
	dsn = strings.TrimSpace(dsn)
	if scheme, _, ok := strings.Cut(dsn, ":"); ok && slices.Contains(spec.schemes, strings.ToLower(scheme)) {
		return ParseURL(dsn)
	}
	if dsn == "" {
		return Source{}, urlErr("empty %s DSN", spec.title)
	}
	return spec.fromDSN(spec, dsn)
}

// parseURLErr returns the reason of a url.Parse error without the URL it
// quotes, which may hold a password.
func parseURLErr(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

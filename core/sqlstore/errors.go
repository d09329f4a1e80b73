package sqlstore

import (
	"errors"
	"reflect"
)

// ErrNoTable is wrapped by the errors of a Store whose table does not exist.
// Create the table with Store.Migrate, or apply the DDL of Store.Schema
// with your migration tool.
var ErrNoTable = errors.New("sqlstore: outbox table does not exist")

// noTableError is a database error that says the store's table is missing.
type noTableError struct {
	table string
	err   error
}

func (e *noTableError) Error() string {
	return "table " + e.table + " does not exist: create it with Store.Migrate (or apply the DDL of Store.Schema): " + e.err.Error()
}

func (e *noTableError) Unwrap() []error { return []error{ErrNoTable, e.err} }

// explain returns err, wrapped with ErrNoTable and a hint when the dialect
// recognizes it as "the table does not exist".
func (s *Store) explain(err error) error {
	if err == nil || s.d.missingTable == nil || !s.d.missingTable(err) {
		return err
	}
	return &noTableError{table: s.table, err: err}
}

// sqlState returns the SQLSTATE of a PostgreSQL driver error, or "".
// Drivers are not imported: pgx's and lib/pq's errors have a SQLState
// method; older lib/pq versions only a Code field, read by reflection.
func sqlState(err error) string {
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		return st.SQLState()
	}
	if f, ok := driverErrorField(err, "Code"); ok && f.Kind() == reflect.String {
		return f.String()
	}
	return ""
}

// driverErrorField returns the named field of the first error in err's
// chain that is a struct (or a pointer to one) with such a field, for
// drivers whose error types expose their codes only as fields, such as
// go-sql-driver/mysql's MySQLError.Number.
func driverErrorField(err error, name string) (reflect.Value, bool) {
	for err != nil {
		v := reflect.ValueOf(err)
		for v.Kind() == reflect.Pointer && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() == reflect.Struct {
			if f := v.FieldByName(name); f.IsValid() && f.CanInterface() {
				return f, true
			}
		}
		err = errors.Unwrap(err)
	}
	return reflect.Value{}, false
}

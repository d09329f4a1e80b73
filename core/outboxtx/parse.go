package outboxtx

import (
	"strings"
	"unicode"
)

// Op is the kind of savepoint statement ParseSavepoint recognized.
type Op int

// The savepoint statements.
const (
	// OpNone is any other statement.
	OpNone Op = iota
	// OpSavepoint is SAVEPOINT name.
	OpSavepoint
	// OpRelease is RELEASE [SAVEPOINT] name.
	OpRelease
	// OpRollbackTo is ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name.
	OpRollbackTo
)

// String returns the statement's keywords, such as "ROLLBACK TO".
func (o Op) String() string {
	switch o {
	case OpSavepoint:
		return "SAVEPOINT"
	case OpRelease:
		return "RELEASE"
	case OpRollbackTo:
		return "ROLLBACK TO"
	}
	return "none"
}

// maxSavepointStmt bounds the statements worth parsing: a savepoint
// statement is short, an INSERT of a batch is not.
const maxSavepointStmt = 256

// ParseSavepoint recognizes a savepoint statement, in any letter case, with
// optional surrounding white space and a trailing semicolon, and returns its
// kind and the savepoint's name as written (quotes included). Anything else
// returns OpNone.
func ParseSavepoint(query string) (Op, string) {
	if len(query) > maxSavepointStmt {
		return OpNone, ""
	}
	rest := strings.TrimSuffix(strings.TrimSpace(query), ";")
	var op Op
	switch {
	case keyword(&rest, "SAVEPOINT"):
		op = OpSavepoint
	case keyword(&rest, "RELEASE"):
		op = OpRelease
		keyword(&rest, "SAVEPOINT")
	case keyword(&rest, "ROLLBACK"):
		if !keyword(&rest, "WORK") {
			keyword(&rest, "TRANSACTION")
		}
		if !keyword(&rest, "TO") {
			return OpNone, ""
		}
		op = OpRollbackTo
		keyword(&rest, "SAVEPOINT")
	default:
		return OpNone, ""
	}
	name := strings.TrimSpace(rest)
	if name == "" || (!isQuoted(name) && strings.IndexFunc(name, unicode.IsSpace) >= 0) {
		return OpNone, ""
	}
	return op, name
}

// keyword consumes kw (any case) and the white space after it from the start
// of *s, if *s starts with kw followed by white space or its end.
func keyword(s *string, kw string) bool {
	str := strings.TrimLeftFunc(*s, unicode.IsSpace)
	if len(str) < len(kw) || !strings.EqualFold(str[:len(kw)], kw) {
		return false
	}
	after := str[len(kw):]
	if after != "" && !unicode.IsSpace(rune(after[0])) {
		return false
	}
	*s = strings.TrimLeftFunc(after, unicode.IsSpace)
	return true
}

func isQuoted(name string) bool {
	if len(name) < 2 {
		return false
	}
	first, last := name[0], name[len(name)-1]
	return (first == '"' && last == '"') || (first == '`' && last == '`') || (first == '[' && last == ']')
}

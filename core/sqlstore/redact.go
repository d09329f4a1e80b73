package sqlstore

import (
	"regexp"
	"strings"

	"github.com/go-outbox/outbox/core/internal/secret"
)

// redactedSecret stands in a redacted DSN for each secret taken out.
const redactedSecret = "xxxxx"

// The driver DSNs that are not URLs: PostgreSQL's key=value form, and
// go-sql-driver/mysql's [user[:password]@]tcp(host:port)/database.
var (
	keywordDSNForm = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=`)
	mysqlDSNForm   = regexp.MustCompile(`^([^/]*@)?(tcp|unix)(\([^)]*\))?/`)
)

// DSNDialect returns the dialect of a driver DSN that is not a URL: a
// PostgreSQL key=value DSN ("host=db user=app …") or a go-sql-driver/mysql
// DSN ("app:pw@tcp(db:3306)/shop"); nil for anything else. ParseDSN reads
// such a DSN with the dialect.
func DSNDialect(dsn string) Dialect {
	switch {
	case strings.Contains(dsn, "://"):
		return nil
	case keywordDSNForm.MatchString(dsn):
		return PostgreSQL
	case mysqlDSNForm.MatchString(dsn):
		return MySQL
	}
	return nil
}

// secretKey reports whether a DSN parameter or key=value key names a
// secret: a password, a passphrase, a token or a secret.
func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"pass", "secret", "token"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// RedactDSN returns dsn with its secrets replaced by "xxxxx", for
// messages and logs. It reads every form a database is named by here, and
// does not need dsn to be valid:
//
//	postgres://user:pw@host/db?sslpassword=pw  → postgres://user:xxxxx@host/db?sslpassword=xxxxx
//	host=h user=u password='p w' dbname=d      → host=h user=u password=xxxxx dbname=d
//	user:pw@tcp(host:3306)/db                  → user:xxxxx@tcp(host:3306)/db
//
// In a URL the password of the user information and the value of every
// parameter whose name holds "pass", "secret" or "token" are secrets; in a
// PostgreSQL key=value DSN the values of such keys; in a
// go-sql-driver/mysql DSN the password before the '@'. A value naming no
// secret is returned as it is.
func RedactDSN(dsn string) string {
	redacted, _ := redactDSN(dsn)
	return redacted
}

// ScrubDSN returns text with every secret of dsn (see RedactDSN) replaced
// by "xxxxx": for a message, such as a driver's error, that may quote
// the DSN or its password in a form RedactDSN would not find.
func ScrubDSN(dsn, text string) string {
	_, secrets := redactDSN(dsn)
	return secrets.Scrub(text, redactedSecret)
}

// redactDSN returns dsn redacted and its secrets.
func redactDSN(dsn string) (string, secret.Set) {
	var (
		secrets  []string
		redacted string
	)
	keep := func(s string) string {
		secrets = append(secrets, s)
		return redactedSecret
	}
	switch {
	case strings.Contains(dsn, "://"):
		redacted = redactURL(dsn, keep)
	case keywordDSNForm.MatchString(dsn):
		redacted = redactKeywords(dsn, keep)
	default:
		redacted = redactDriverDSN(dsn, keep)
	}
	return redacted, secret.NewSet(secrets, redactedSecret)
}

// redactURL redacts a URL: whatever stands between the first ':' after
// "://" and the last '@' is the password, and the secret parameters of
// its query; it does not parse the URL, which may be malformed.
func redactURL(raw string, keep func(string) string) string {
	i := strings.Index(raw, "://") + len("://")
	head, rest := raw[:i], raw[i:]
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if user, pass, ok := strings.Cut(rest[:at], ":"); ok {
			rest = user + ":" + keep(pass) + rest[at:]
		}
	}
	return head + redactQuery(rest, keep)
}

// redactQuery redacts the values of the secret parameters of the query
// of s, the part after its first '?'.
func redactQuery(s string, keep func(string) string) string {
	base, query, ok := strings.Cut(s, "?")
	if !ok {
		return s
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		if k, v, ok := strings.Cut(p, "="); ok && secretKey(k) {
			params[i] = k + "=" + keep(v)
		}
	}
	return base + "?" + strings.Join(params, "&")
}

// redactKeywords redacts the secret values of a PostgreSQL key=value DSN:
// key = value pairs separated by spaces, a value either bare or in single
// quotes with backslash escapes.
func redactKeywords(dsn string, keep func(string) string) string {
	var b strings.Builder
	for i := 0; i < len(dsn); {
		eq := strings.IndexByte(dsn[i:], '=')
		if eq < 0 {
			b.WriteString(dsn[i:])
			break
		}
		key := strings.TrimSpace(dsn[i : i+eq])
		if sp := strings.LastIndexAny(key, " \t\n"); sp >= 0 { // a bare word before the key
			key = key[sp+1:]
		}
		b.WriteString(dsn[i : i+eq+1])
		i += eq + 1
		for i < len(dsn) && (dsn[i] == ' ' || dsn[i] == '\t') {
			b.WriteByte(dsn[i])
			i++
		}
		// The value: quoted, or up to the next space.
		start, end, value := i, i, ""
		if i < len(dsn) && dsn[i] == '\'' {
			var v strings.Builder
			end = i + 1
			for end < len(dsn) && dsn[end] != '\'' {
				if dsn[end] == '\\' && end+1 < len(dsn) {
					end++
				}
				v.WriteByte(dsn[end])
				end++
			}
			end = min(end+1, len(dsn))
			value = v.String()
		} else {
			for end < len(dsn) && dsn[end] != ' ' && dsn[end] != '\t' && dsn[end] != '\n' {
				end++
			}
			value = dsn[start:end]
		}
		if secretKey(key) {
			keep(dsn[start:end])
			b.WriteString(keep(value))
		} else {
			b.WriteString(dsn[start:end])
		}
		i = end
	}
	return b.String()
}

// redactDriverDSN redacts a go-sql-driver/mysql DSN,
// [user[:password]@][net[(addr)]]/dbname[?params], as the driver reads
// it: the password runs from the first ':' to the last '@' before the
// last '/'. Another value (a file path) has nothing to redact but the
// secret parameters of a query.
func redactDriverDSN(dsn string, keep func(string) string) string {
	head, tail := dsn, ""
	if slash := strings.LastIndex(dsn, "/"); slash >= 0 {
		head, tail = dsn[:slash], dsn[slash:]
	}
	if at := strings.LastIndex(head, "@"); at >= 0 {
		if user, pass, ok := strings.Cut(head[:at], ":"); ok {
			head = user + ":" + keep(pass) + head[at:]
		}
	}
	return head + redactQuery(tail, keep)
}

package sqlstore

import (
	"strings"
	"testing"
)

// Every form of DSN loses its secrets, valid or not; the rest is kept.
func TestRedactDSN(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u:secret@127.0.0.1:5432/db?sslmode=disable", "postgres://u:xxxxx@127.0.0.1:5432/db?sslmode=disable"},
		{"postgresql://u:se%2Fcret@h/db", "postgresql://u:xxxxx@h/db"},
		{"postgres://u:sec@ret@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:secret@[::1/x", "postgres://u:xxxxx@[::1/x"},
		{"postgres://u:secret@h/%zz", "postgres://u:xxxxx@h/%zz"},
		{"postgres://h/db?password=secret&sslpassword=secret2&user=u", "postgres://h/db?password=xxxxx&sslpassword=xxxxx&user=u"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"mysql://root:secret@127.0.0.1:3306/test", "mysql://root:xxxxx@127.0.0.1:3306/test"},
		{"host=127.0.0.1 user=u password=secret dbname=x", "host=127.0.0.1 user=u password=xxxxx dbname=x"},
		{"host=h password = 'sec ret\\' x' dbname=x", "host=h password = xxxxx dbname=x"},
		{"password=secret", "password=xxxxx"},
		{"host=h sslpassword=secret PASSWORD=other", "host=h sslpassword=xxxxx PASSWORD=xxxxx"},
		{"root:secret@tcp(127.0.0.1:3306)/test?timeout=5s", "root:xxxxx@tcp(127.0.0.1:3306)/test?timeout=5s"},
		{"root:se@c/ret@tcp(h)/test", "root:xxxxx@tcp(h)/test"},
		{"root@unix(/tmp/mysql.sock)/test", "root@unix(/tmp/mysql.sock)/test"},
		{"root:secret@/test?loc=Europe/Paris", "root:xxxxx@/test?loc=Europe/Paris"},
		{"/var/lib/app.db", "/var/lib/app.db"},
		{"file:app.db?_pragma=busy_timeout(5000)", "file:app.db?_pragma=busy_timeout(5000)"},
		{"", ""},
	} {
		got := RedactDSN(tc.dsn)
		if got != tc.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
		if strings.Contains(got, "secret") || strings.Contains(got, "sec ret") || strings.Contains(got, "other") {
			t.Errorf("RedactDSN(%q) = %q keeps a secret", tc.dsn, got)
		}
	}
}

// ScrubDSN takes the secrets out of any text, also as a URL escapes them.
func TestScrubDSN(t *testing.T) {
	for _, tc := range []struct{ dsn, text, want string }{
		{"postgres://u:p%40ss@h/db", "auth failed for p@ss and p%40ss", "auth failed for xxxxx and xxxxx"},
		{"host=h password='a b c'", "cannot parse host=h password='a b c'", "cannot parse host=h password=xxxxx"},
		{"root:hunter2@tcp(h)/db", "root:hunter2@tcp(h)/db: refused", "root:xxxxx@tcp(h)/db: refused"},
		{"postgres://h/db?password=secret", "dial postgres://h/db?password=secret", "dial postgres://h/db?password=xxxxx"},
		{"/var/lib/app.db", "no such file /var/lib/app.db", "no such file /var/lib/app.db"},
	} {
		if got := ScrubDSN(tc.dsn, tc.text); got != tc.want {
			t.Errorf("ScrubDSN(%q, %q) = %q, want %q", tc.dsn, tc.text, got, tc.want)
		}
	}
}

func TestDSNDialect(t *testing.T) {
	for dsn, want := range map[string]Dialect{
		"host=db user=app password=x": PostgreSQL, " dbname = shop": PostgreSQL,
		"app:pw@tcp(db:3306)/shop": MySQL, "tcp(db)/shop": MySQL, "root@unix(/tmp/m.sock)/shop": MySQL,
		"postgres://u@h/db?x=1": nil, "/var/lib/app.db": nil, "app.db": nil, "file:app.db?x=1": nil, "": nil,
	} {
		if got := DSNDialect(dsn); got != want {
			t.Errorf("DSNDialect(%q) = %v, want %v", dsn, got, want)
		}
	}
}

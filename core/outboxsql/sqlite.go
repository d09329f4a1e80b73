package outboxsql

import "net/url"

// SQLiteDSN returns a modernc.org/sqlite data source name for the database
// file at path, set up for an outbox shared by concurrent writers:
//
//   - journal_mode(WAL): readers do not block the writer and vice versa;
//   - busy_timeout(10000): a connection that finds the database locked waits
//     up to 10 s instead of failing at once with SQLITE_BUSY;
//   - _txlock=immediate: transactions take the write lock at BEGIN, so two
//     transactions that read and then write cannot deadlock on the lock
//     upgrade (which SQLite reports as SQLITE_BUSY without waiting);
//   - foreign_keys(1): enforce foreign keys, off by default in SQLite.
func SQLiteDSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxadmin"
	"github.com/go-outbox/outbox/core/outboxsql"
	"github.com/go-outbox/outbox/core/sqlstore"
)

// Exit codes, for scripts; see the help text.
const (
	exitOK       = 0 // done
	exitFailed   = 1 // the operation failed: database unreachable, SQL error, …
	exitUsage    = 2 // bad command line: flag, URL, duration, missing argument
	exitNotFound = 3 // unknown id, missing table or database file
	exitRefused  = 4 // destructive command not confirmed
)

// connectTimeout bounds the first connection to the database.
const connectTimeout = 15 * time.Second

// cliError is an error with its exit code and its one-line message.
type cliError struct {
	code int
	msg  string
}

func (e *cliError) Error() string { return e.msg }

func usageErr(format string, args ...any) error {
	return &cliError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

func notFoundErr(format string, args ...any) error {
	return &cliError{code: exitNotFound, msg: fmt.Sprintf(format, args...)}
}

func refusedErr(format string, args ...any) error {
	return &cliError{code: exitRefused, msg: fmt.Sprintf(format, args...)}
}

func failErr(format string, args ...any) error {
	return &cliError{code: exitFailed, msg: fmt.Sprintf(format, args...)}
}

// errHelp reports that help was asked for and printed: exit code 0.
var errHelp = errors.New("help printed")

// globals are the flags every command accepts, before or after its name.
type globals struct {
	db    string
	table string
	json  bool
	yes   bool
	// as names who acts, for the audit trail (default: the OS user).
	as string
}

// cli is one run of outboxctl.
type cli struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	g      globals
	now    func() time.Time
	// pageSize is how many events one List reads when outboxctl pages
	// through the table.
	pageSize int
	// sess is the open database, once a command opened it.
	sess *session
	// flags is the flag set of the command being run.
	flags *flag.FlagSet
	// stderrTTY is set when stderr is a terminal: long commands show
	// their progress there. progressShown is set while a progress line is
	// on it.
	stderrTTY, progressShown bool
	// pausesNow are the table's pauses, which stats shows.
	pausesNow []outboxadmin.Pause
}

// run runs outboxctl with args (without the program name) and returns its
// exit code. Output goes to stdout; errors, as one line, and confirmation
// prompts go to stderr; answers are read from stdin.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return newCLI(ctx, stdin, stdout, stderr).execute(args)
}

func newCLI(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) *cli {
	return &cli{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, pageSize: pageSize, stderrTTY: isTerminal(stderr),
		now: func() time.Time { return time.Now().UTC() }}
}

// execute runs the command of args and returns the exit code. The error
// line never shows a secret of the database's URL or DSN, whatever quoted
// it.
func (c *cli) execute(args []string) int {
	err := c.main(args)
	code, msg := c.exit(err)
	if c.sess != nil {
		c.sess.close()
	}
	if msg != "" {
		fmt.Fprintln(c.stderr, "outboxctl: "+oneLine(sqlstore.ScrubDSN(c.g.db, msg)))
	}
	return code
}

// main parses the global flags and runs the command.
func (c *cli) main(args []string) error {
	c.g.db = os.Getenv("OUTBOX_DB")
	c.g.table = cmp.Or(os.Getenv("OUTBOX_TABLE"), sqlstore.DefaultTable)
	fs := c.flagSet("", false)
	if err := fs.Parse(args); err != nil {
		return c.flagErr("", err)
	}
	args = fs.Args()
	if len(args) == 0 {
		return usageErr("no command (see `outboxctl help`)")
	}
	name, rest := args[0], args[1:]
	if name == "dead" {
		if len(rest) == 0 {
			return usageErr("dead: no subcommand: list, show, replay, replay-all or delete (see `outboxctl help dead`)")
		}
		switch rest[0] {
		case "help", "-h", "-help", "--help":
			return c.help([]string{"dead"})
		}
		name, rest = "dead "+rest[0], rest[1:]
	}
	switch name {
	case "help":
		return c.help(rest)
	case "migrate":
		return c.migrate(rest)
	case "stats":
		return c.stats(rest)
	case "get":
		return c.get(rest)
	case "dead list":
		return c.deadList(rest)
	case "dead show":
		return c.deadShow(rest)
	case "dead replay":
		return c.deadReplay(rest)
	case "dead replay-all":
		return c.deadReplayAll(rest)
	case "dead delete":
		return c.deadDelete(rest)
	case "purge":
		return c.purge(rest)
	case "pause":
		return c.pause(rest)
	case "resume":
		return c.resume(rest)
	case "pauses":
		return c.pauses(rest)
	case "audit":
		return c.audit(rest)
	case "force-dead":
		return c.forceDead(rest)
	case "delete":
		return c.deleteEvents(rest)
	case "skip-head":
		return c.skipHead(rest)
	}
	if strings.HasPrefix(name, "dead ") {
		return usageErr("unknown command %q: dead takes list, show, replay, replay-all or delete (see `outboxctl help dead`)", name)
	}
	return usageErr("unknown command %q (see `outboxctl help`)", name)
}

// exit maps err to an exit code and the message to print.
func (c *cli) exit(err error) (int, string) {
	var ce *cliError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK, ""
	case errors.As(err, &ce):
		return ce.code, ce.msg
	case errors.Is(err, sqlstore.ErrNoTable):
		return exitNotFound, c.noTableMessage()
	case errors.Is(err, outbox.ErrNotFound):
		return exitNotFound, err.Error()
	case errors.Is(err, outbox.ErrInvalidConfig):
		return exitUsage, err.Error()
	case errors.Is(err, context.Canceled):
		return exitFailed, "interrupted"
	}
	return exitFailed, err.Error()
}

// noTableMessage says that --table does not exist, and what to do: most
// often the service uses another table name (--table, OUTBOX_TABLE),
// which the message lists when the database has outbox tables; only to
// create a new outbox table, migrate.
func (c *cli) noTableMessage() string {
	cmd := "outboxctl migrate --apply"
	if c.g.table != sqlstore.DefaultTable {
		cmd = "outboxctl --table " + c.g.table + " migrate --apply"
	}
	db, found := "the database", ""
	if c.sess != nil {
		db = c.sess.t.display
		if tables := c.sess.outboxTables(c.ctx); len(tables) > 0 {
			found = " (outbox tables there: " + strings.Join(tables, ", ") + ")"
		}
	}
	return fmt.Sprintf("table %s does not exist in %s. If the service uses another table, pass --table NAME or set OUTBOX_TABLE%s; "+
		"only to create a new, empty outbox table here, run `%s`", c.g.table, db, found, cmd)
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// flagSet returns the flag set of command name with the global flags, and
// --yes for a destructive command.
func (c *cli) flagSet(name string, destructive bool) *flag.FlagSet {
	fs := flag.NewFlagSet("outboxctl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.g.db, "db", c.g.db, "database URL (default $OUTBOX_DB)")
	fs.StringVar(&c.g.table, "table", c.g.table, "outbox table")
	fs.BoolVar(&c.g.json, "json", c.g.json, "print one JSON document")
	fs.StringVar(&c.g.as, "as", c.g.as, "who acts, in the audit trail (default: the OS user)")
	if destructive || name == "" {
		fs.BoolVar(&c.g.yes, "yes", c.g.yes, "do not ask for confirmation")
	}
	c.flags = fs
	return fs
}

// parse parses the flags of command name in args, before, between or after
// its positional arguments (which it returns); "--" ends the flags.
func (c *cli) parse(fs *flag.FlagSet, name string, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, c.flagErr(name, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func (c *cli) flagErr(name string, err error) error {
	if errors.Is(err, flag.ErrHelp) {
		if err := c.printHelp(name); err != nil {
			return err
		}
		return errHelp
	}
	if name == "" {
		return usageErr("%v (see `outboxctl -h`)", err)
	}
	return usageErr("%s: %v (see `outboxctl %s -h`)", name, err, name)
}

// session is the open database of a command.
type session struct {
	t      *target
	db     *sql.DB
	store  *outboxsql.Store
	client *outbox.Client
}

func (s *session) close() {
	if s.client != nil {
		_ = s.client.Close(context.Background())
	}
	_ = s.db.Close()
}

// target parses --db.
func (c *cli) target() (*target, error) { return parseDBURL(c.g.db) }

// storeOn opens t's database, without connecting, and returns it with the
// Store of --table in it.
func (c *cli) storeOn(t *target) (*sql.DB, *outboxsql.Store, error) {
	db, err := t.open()
	if err != nil {
		return nil, nil, usageErr("--db %s: %v", t.display, err)
	}
	store, err := outboxsql.Open(db, outboxsql.WithDialect(t.dialect), outboxsql.WithTable(c.g.table))
	if err != nil {
		_ = db.Close()
		return nil, nil, usageErr("--table: %v", err)
	}
	return db, store, nil
}

// open connects to the database of --db and returns the session on
// --table. An existing SQLite file is required unless create is set.
//
// The session's Client is never started: it only gives the dead-letter
// admin (Client.Dead) and lookups; outboxctl never delivers an event.
func (c *cli) open(create bool) (*session, error) {
	t, err := c.target()
	if err != nil {
		return nil, err
	}
	if err := checkActor(c.g.as); err != nil {
		return nil, err
	}
	if c.g.as != "" {
		c.ctx = outbox.WithActor(c.ctx, c.g.as)
	}
	if !create {
		if err := t.checkExists(); err != nil {
			return nil, err
		}
	}
	db, store, err := c.storeOn(t)
	if err != nil {
		return nil, err
	}
	c.sess = &session{t: t, db: db, store: store}
	ctx, cancel := context.WithTimeout(c.ctx, connectTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		if c.ctx.Err() != nil {
			return nil, c.ctx.Err()
		}
		return nil, failErr("cannot connect to %s: %v", t.display, err)
	}
	client, err := outbox.New(outbox.Config{
		Store: store, Mode: outbox.ModePollerOnly, DisablePurge: true,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	c.sess.client = client
	return c.sess, nil
}

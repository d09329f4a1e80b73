package main

import "strings"

// helpTexts holds the help of each command, by name ("" is the overview).
var helpTexts = map[string]string{
	"": `outboxctl inspects and operates an outbox table. It never delivers events.

Usage:
  outboxctl [--db URL] [--table NAME] [--json] [--yes] <command> [arguments]

Commands:
  migrate [--apply]          print the table's DDL, or create the table and its indexes
  stats [--tenant T]         events per status, age of the oldest pending event
  get <id>                   one event: state, headers, payload
  dead list [filters]        DEAD events (--type, --aggregate, --tenant, --older-than, --limit, --after)
  dead show <id>             one DEAD event
  dead replay <id>...        make DEAD events NEW again, due now, with zero attempts
  dead replay-all [filters]  replay every DEAD event the filters select
  dead delete <id>...        delete DEAD events for good
  purge --status done|dead --older-than DURATION [--limit N] [--tenant T]
                             delete DONE or DEAD events completed before now - DURATION
  help [command]             this help, or a command's

Global flags (also accepted after the command):
  --db URL       the database (default: the environment variable OUTBOX_DB)
  --table NAME   the outbox table, optionally schema-qualified (default: the
                 environment variable OUTBOX_TABLE, else outbox_event)
  --json         print one JSON document instead of text
  --yes          do not ask before destructive commands

` + urlHelp + `

Destructive commands (dead replay of more than one id, dead replay-all, dead
delete, purge) ask for confirmation (y/N) when stdin is a terminal, saying how
many events they change; with --yes they do not ask; with neither they refuse
(exit code 4) and change nothing.

--tenant T limits a command to tenant T's events; leave it out for every
tenant. An empty or blank --tenant is refused (exit code 2), never read as
"every tenant".

A missing table is most often a wrong --table: the error lists the outbox
tables the database has. Run migrate --apply only to create a new table.

Long commands (dead list --limit 0, dead replay-all) read 500 events at a time
and show their progress on stderr when it is a terminal.

` + durationHelp + `

` + ageFilterHelp + `

Exit codes:
  0  done
  1  the operation failed (database unreachable, SQL error, …)
  2  usage error: bad flag, bad URL or duration, missing argument, unknown command
  3  not found: unknown event id, an id that is not DEAD, missing table or SQLite file
  4  refused: a destructive command was not confirmed
An error prints one line on stderr. Bad input, unknown ids, a missing table and
a refusal change nothing.
`,
	"migrate": `Usage: outboxctl migrate [--apply]

Without --apply, prints the CREATE TABLE and CREATE INDEX statements of the
outbox table for the database of --db (its dialect is read from the URL; no
connection is made), for a migration tool of your own.

  --apply   run them: create the table and its indexes if they do not exist
            (a new SQLite file is created), then check that every index is there.
            Safe to run again.
`,
	"stats": `Usage: outboxctl stats [--tenant T]

Counts the table's events per status (NEW, RETRY, DONE, DEAD) and gives the
creation time and age of the oldest pending (NEW or RETRY) event.

  --tenant T   count the events of tenant T only (no oldest pending event)
`,
	"get": `Usage: outboxctl get <id>

Shows one event in any status: its fields, delivery state (attempts, last
error, claim), headers and payload — as text if it is JSON, in base64 if it is
bytes. Exit code 3 if there is no such event.
`,
	"dead": `Usage: outboxctl dead <list|show|replay|replay-all|delete> …

  dead list [filters] [--limit N] [--after ID]   DEAD events, by id
  dead show <id>                                 one DEAD event
  dead replay [--tenant T] <id>...               replay DEAD events
  dead replay-all [filters]                      replay every DEAD event the filters select
  dead delete [--tenant T] <id>...               delete DEAD events for good

Filters:
  --type T          events of event type T
  --aggregate A     events of aggregate type A
  --tenant T        events of tenant T
  --older-than D    events that went DEAD more than D ago (24h, 7d, 1d12h)

` + ageFilterHelp + `

See ` + "`outboxctl dead <subcommand> -h`" + `.
`,
	"dead list": `Usage: outboxctl dead list [--type T] [--aggregate A] [--tenant T] [--older-than D] [--limit N] [--after ID]

Lists DEAD events by id, with their last error.

  --type T          only events of event type T
  --aggregate A     only events of aggregate type A
  --tenant T        only events of tenant T
  --older-than D    only events that went DEAD more than D ago (24h, 7d, 1d12h)
  --limit N         at most N events (default 100; 0: all)
  --after ID        only events with ids after ID: when more match than
                    --limit, the output ends with the --after of the next page

` + ageFilterHelp + `
`,
	"dead show": `Usage: outboxctl dead show <id>

Shows one DEAD event, as ` + "`outboxctl get`" + ` does. Exit code 3 if there is no
such event or it is not DEAD.
`,
	"dead replay": `Usage: outboxctl dead replay [--tenant T] [--yes] <id>...

Makes DEAD events NEW again: zero attempts, due now, unclaimed. A running
outbox delivers them at its next poll. Every id must be a DEAD event (of
tenant T, with --tenant), or nothing is replayed (exit code 3). Replaying
more than one id asks for confirmation (see --yes).

  --tenant T   every id must be an event of tenant T
  --yes        do not ask for confirmation
`,
	"dead replay-all": `Usage: outboxctl dead replay-all [--type T] [--aggregate A] [--tenant T] [--older-than D] [--yes]

Replays every DEAD event the filters select (all DEAD events, of every
tenant, without filters), after confirmation: the events counted for the
prompt, page by page; one that goes DEAD after the count is left alone.
Progress is shown on stderr when it is a terminal.

  --type T          only events of event type T
  --aggregate A     only events of aggregate type A
  --tenant T        only events of tenant T (leave it out for every tenant;
                    an empty value is refused)
  --older-than D    only events that went DEAD more than D ago (24h, 7d, 1d12h)
  --yes             do not ask for confirmation

` + ageFilterHelp + `
`,
	"dead delete": `Usage: outboxctl dead delete [--tenant T] [--yes] <id>...

Deletes DEAD events for good, after confirmation. Every id must be a DEAD
event (of tenant T, with --tenant), or nothing is deleted (exit code 3).

  --tenant T   every id must be an event of tenant T
  --yes        do not ask for confirmation
`,
	"purge": `Usage: outboxctl purge --status done|dead --older-than D [--limit N] [--tenant T] [--yes]

Deletes DONE or DEAD events completed (or, without a completion time, created)
more than D ago, in batches of 500, after a confirmation that says how many
events match — what the outbox's purge scheduler does by its retention
settings.

  --status done|dead   which events (required)
  --older-than D       completed more than D ago: 90m, 36h, 7d, 1d12h (required)
  --limit N            at most N events (default 0: every matching event)
  --tenant T           only events of tenant T
  --yes                do not ask for confirmation
`,
}

const urlHelp = `Database URLs (--db, or OUTBOX_DB):
  postgres://user:password@host:5432/db?sslmode=disable  PostgreSQL (pgx); postgresql:// too
  mysql://user:password@host:3306/db?tls=true            MySQL or MariaDB (go-sql-driver/mysql);
                                                         the parameters are the driver's (parseTime=true unless
                                                         set; loc other than UTC is refused)
  sqlite:///absolute/path/app.db                         SQLite (modernc.org/sqlite, WAL, busy timeout); sqlite3: too
  sqlite:relative/path/app.db                            SQLite, relative to the working directory
  file:app.db?_pragma=busy_timeout(5000)                 SQLite, the driver's own DSN as it is
  /path/to/app.db                                        an existing SQLite file
  host=db user=app password=secret dbname=shop           PostgreSQL, a key=value DSN
  app:secret@tcp(db:3306)/shop                           MySQL or MariaDB, the driver's DSN
Passwords and other secrets never appear in messages.`

const durationHelp = `Durations: Go durations (90m, 36h) with an optional number of days in front
(7d, 1d12h).`

const ageFilterHelp = `--older-than of the dead commands: the outbox's queries have no time filter,
so outboxctl pages through the DEAD events that match the other filters (500
per query, by id) and compares their DEAD time (completion time) itself.`

// printHelp prints the help of command name ("" for the overview).
func (c *cli) printHelp(name string) error {
	text, ok := helpTexts[name]
	if !ok {
		return usageErr("help: unknown command %q (see `outboxctl help`)", name)
	}
	if name != "" {
		text += "\nGlobal flags --db, --table and --json work here too (see `outboxctl help`).\n"
	}
	c.printf(c.stdout, "%s", text)
	return nil
}

func (c *cli) help(args []string) error {
	if err := c.printHelp(strings.Join(args, " ")); err != nil {
		return err
	}
	return errHelp
}

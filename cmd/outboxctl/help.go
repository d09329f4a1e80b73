package main

import "strings"

// helpTexts holds the help of each command, by name ("" is the overview).
var helpTexts = map[string]string{
	"": `outboxctl inspects and operates an outbox table. It never delivers events.

Usage:
  outboxctl [--db URL] [--table NAME] [--json] [--yes] [--as NAME] <command> [arguments]

Commands:
  migrate [--apply]          print the table's DDL, or create the table and its indexes
  stats [--tenant T]         events per status, age of the oldest pending event
  get <id>                   one event: state, headers, payload
  dead list [filters]        DEAD events (--type, --aggregate, --tenant, --older-than, --limit, --after)
  dead show <id>             one DEAD event
  dead replay <id>...        make DEAD events NEW again, due now, with zero attempts
  dead replay-all [filters]  replay every DEAD event the filters select
                             (--dry-run: count them per type and tenant; --rate 100/s: pace it)
  dead delete <id>...        delete DEAD events for good
  purge --status done|dead --older-than DURATION [--limit N] [--tenant T]
                             delete DONE or DEAD events completed before now - DURATION
  pause <type|*> --reason R  stop delivering an event type (* every type) on every instance
  resume <type|*>            deliver it again
  pauses                     the stored pauses: who paused what, when, why
  audit [--limit N]          the audit trail of operator actions, newest first
  force-dead <id>... --reason R
                             move pending (NEW or RETRY) events to DEAD, undelivered
  delete <id>... [--reason R]
                             delete events in any status for good
  skip-head <id> --reason R  give up a pending event (DONE, undelivered): its key goes on
  help [command]             this help, or a command's

Global flags (also accepted after the command):
  --db URL       the database (default: the environment variable OUTBOX_DB)
  --table NAME   the outbox table, optionally schema-qualified (default: the
                 environment variable OUTBOX_TABLE, else outbox_event)
  --json         print one JSON document instead of text
  --yes          do not ask before destructive commands
  --as NAME      who acts, as the audit trail records it (default: the
                 operating system's user, as os:NAME)

` + urlHelp + `

Destructive commands (dead replay of more than one id, dead replay-all, dead
delete, purge, force-dead, delete, skip-head) ask for confirmation (y/N) when stdin is a terminal, saying how
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
  3  not found: unknown event id, an id that is not DEAD (dead commands) or not
     pending (force-dead, skip-head), a scope that is not paused (resume),
     missing table or SQLite file
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
	"dead replay-all": `Usage: outboxctl dead replay-all [--type T] [--aggregate A] [--tenant T] [--older-than D] [--dry-run] [--rate R] [--yes]

Replays every DEAD event the filters select (all DEAD events, of every
tenant, without filters), after confirmation: the events counted for the
prompt, page by page; one that goes DEAD after the count is left alone.
Progress is shown on stderr when it is a terminal: done of total, and with
--rate the rate reached and the time left. The replay is one entry of the
audit trail (who, the filter, how many).

  --dry-run         count the events it would replay, per event type and per
                    tenant, and change nothing (no confirmation asked)
  --rate R          replay at most R events a second (100/s, 600/m, 5000/h),
                    in small paced batches, so that a mass replay does not
                    flatten the downstream; a final line says how long it took

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
	"pause": `Usage: outboxctl pause <type|*> --reason R

Stores a pause of event type T (or of every type, with *): no instance
delivering from the table claims its events until it is resumed — they stay
pending, in order, their attempts unused. Running instances obey within about
a second; the pause outlives restarts. Who paused (--as, or the operating
system's user), when and why are stored with it and in the audit trail.
Pausing a type again replaces its reason.

  --reason R   why (required)
`,
	"resume": `Usage: outboxctl resume <type|*>

Removes the pause of event type T (or the pause of every type, *): its events
are delivered again. Exit code 3 if it is not paused. Resuming * does not
remove the pauses of single types.
`,
	"pauses": `Usage: outboxctl pauses

Lists the stored pauses: the scope (an event type, or * for every type), who
paused it, since when, and why.
`,
	"audit": `Usage: outboxctl audit [--limit N] [--before ID]

Lists the audit trail of operator actions on the table, newest first: pauses,
resumes, replays, skips, deletions and forced DEADs — by outboxctl, the admin
page or the API — with who ran them, when, on what, why, and how many events
they changed.

  --limit N     at most N entries (default 20, at most 1000)
  --before ID   only entries older than entry ID: when more are older, the
                output ends with the --before of the next page
`,
	"force-dead": `Usage: outboxctl force-dead <id>... --reason R [--yes]

Moves pending (NEW or RETRY) events to DEAD at once, undelivered, with R in
their last error, after confirmation. Every id must be a pending event, or
nothing changes (exit code 3). A delivery running meanwhile stores nothing.
` + "`outboxctl dead replay`" + ` makes them pending again.

  --reason R   why (required)
  --yes        do not ask for confirmation
`,
	"delete": `Usage: outboxctl delete <id>... [--reason R] [--yes]

Deletes events in any status (NEW, RETRY, DONE or DEAD) for good, after a
confirmation that counts them per status. Every id must name an event, or
nothing is deleted (exit code 3). Deleting an ordered event lets the later
events of its key go on. ` + "`outboxctl dead delete`" + ` deletes DEAD events only,
and refuses any other.

  --reason R   why, for the audit trail
  --yes        do not ask for confirmation
`,
	"skip-head": `Usage: outboxctl skip-head <id> --reason R [--yes]

Gives up one pending event without delivering it: it becomes DONE with R in
its last error, so the later events of its ordering key go on. The id must be
a pending event (exit code 3 otherwise).

  --reason R   why (required)
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
		text += "\nGlobal flags --db, --table, --json and --as work here too (see `outboxctl help`).\n"
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

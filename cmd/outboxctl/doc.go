// Command outboxctl inspects and operates an outbox table from a shell:
// print or apply its DDL, count its events, show one, list, replay (with a
// dry run, or at a rate) and delete dead letters, purge old events, pause
// and resume event types on every instance, force pending events to DEAD,
// skip or delete events in any status, and list the audit trail of these
// actions — on SQLite, PostgreSQL and MySQL/MariaDB. It never delivers an
// event.
//
// Install it with
//
//	go install github.com/go-outbox/outbox/cmd/outboxctl@latest
//
// (in a checkout of the repository: go install ./cmd/outboxctl), then:
//
//	export OUTBOX_DB=postgres://app@127.0.0.1:5432/app
//	outboxctl migrate --apply           # CREATE TABLE / INDEX IF NOT EXISTS
//	outboxctl stats                     # events per status, oldest pending
//	outboxctl dead list --older-than 1d # dead letters, with their last error
//	outboxctl get 01JD5K3Q8V4N2M7XGZ6P1R9T0B
//	outboxctl dead replay-all --type OrderPlaced
//	outboxctl dead list --tenant acme   # one tenant's dead letters
//	outboxctl --json dead list | jq -r '.events[].id'
//	outboxctl purge --status done --older-than 7d --yes
//	outboxctl pause PaymentCaptured --reason 'payments API down'
//	outboxctl dead replay-all --dry-run  # how many, per type and tenant
//	outboxctl dead replay-all --rate 100/s --yes
//	outboxctl audit                     # who did what, when, why
//
// Destructive commands ask for confirmation on a terminal and refuse without
// one unless --yes is given. Exit codes: 0 done, 1 failed, 2 usage error,
// 3 not found (event, table or SQLite file), 4 refused. `outboxctl help`
// lists every command, flag and database URL form; docs/outboxctl.md in
// the repository has example outputs.
package main

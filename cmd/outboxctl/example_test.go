package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// outboxctl on a new SQLite file: create the table, count its events, look
// for an event that is not there (exit code 3, the error on stderr — here
// on stdout, to be shown).
func Example() {
	dir, err := os.MkdirTemp("", "outboxctl-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db := "sqlite://" + filepath.Join(dir, "app.db")
	ctx := context.Background()
	for _, args := range [][]string{
		{"migrate", "--apply"},
		{"stats"},
		{"get", "01JD5K3Q8V4N2M7XGZ6P1R9T0B"},
	} {
		fmt.Println("$ outboxctl", strings.Join(args, " "))
		code := run(ctx, append([]string{"--db", db}, args...), strings.NewReader(""), os.Stdout, os.Stdout)
		fmt.Println("exit code", code)
	}
	// Output:
	// $ outboxctl migrate --apply
	// table outbox_event and its indexes are in place (sqlite)
	// exit code 0
	// $ outboxctl stats
	// STATUS  EVENTS
	// NEW     0
	// RETRY   0
	// DONE    0
	// DEAD    0
	// total   0
	//
	// oldest pending: none
	// due now: 0
	// claimed: 0
	// exit code 0
	// $ outboxctl get 01JD5K3Q8V4N2M7XGZ6P1R9T0B
	// outboxctl: no event with id 01JD5K3Q8V4N2M7XGZ6P1R9T0B in outbox_event
	// exit code 3
}

// Command http-demo is a small REST service on uber-go/fx and GORM that
// writes its events through the outbox (the GORM adapter, outboxgorm).
//
// POST /orders stores an order and its OrderPlaced event in one GORM
// transaction; the shipping listener marks the order shipped once the event
// is delivered. The outbox's admin page (package outboxhttp) under /admin/ shows the
// counts, the events and the dead letters, and replays or deletes dead
// letters for an operator who has the admin token; without a token it is
// read-only.
//
//	go run .                                   # SQLite file in $TMPDIR, http://127.0.0.1:8080
//	go run . -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run . -dsn 'mysql://root@127.0.0.1:3306/test' -addr :9090
//	go run . -fail-listener                    # shipping fails: events end in DEAD
//	HTTP_DEMO_ADMIN_TOKEN=s3cret go run .      # the admin page may replay and delete
//
// Endpoints:
//
//	POST /orders                    {"customer":"alice","amount_cents":1200}
//	GET  /orders/{id}
//	GET  /admin/                    the outbox's admin page; its JSON API under /admin/api/
//	GET  /admin/login               asks the browser for the admin token, then opens the page
//	PUT  /debug/shipping            {"fail":true} makes the shipping listener fail
//	GET  /metrics                   Prometheus: outbox_* (delivered, failed, dead, latency histograms, backlog), Go, process
//	GET  /livez, GET /readyz
//
// Traces are off unless asked for: -trace stdout (or HTTP_DEMO_TRACE=stdout)
// prints the spans of requests and deliveries on standard output, one JSON
// line each (-trace pretty: indented); health checks, metrics scrapes and
// the admin page's files are never traced. Logs go to standard error.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/fx"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	dsn := flag.String("dsn", filepath.Join(os.TempDir(), "outbox-http-demo.db"),
		"database: postgres://…, mysql://…, sqlite:path or a file path")
	failListener := flag.Bool("fail-listener", envBool("HTTP_DEMO_FAIL_LISTENER"),
		"start with the shipping listener failing (also HTTP_DEMO_FAIL_LISTENER=1; toggle with PUT /debug/shipping)")
	pretty := flag.Bool("pretty", isTerminal(os.Stderr), "human-readable logs instead of JSON lines")
	logLevel := flag.String("log-level", "info", "trace, debug (fx's wiring and the requests of health checks, metrics and page files included), info, warn or error")
	trace := flag.String("trace", os.Getenv("HTTP_DEMO_TRACE"),
		"off, stdout (one JSON line per span of a request or delivery, on standard output) or pretty (indented) (default HTTP_DEMO_TRACE, else off)")
	adminToken := flag.String("admin-token", "",
		"token that allows replay and delete on the admin page /admin/ (default HTTP_DEMO_ADMIN_TOKEN, which ps does not show; none: read-only)")
	flag.Parse()
	if *adminToken == "" {
		*adminToken = os.Getenv("HTTP_DEMO_ADMIN_TOKEN")
	}
	level, err := zerolog.ParseLevel(*logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "http-demo: -log-level:", err)
		os.Exit(2)
	}

	zerolog.TimeFieldFormat = time.RFC3339Nano
	var logger zerolog.Logger
	if *pretty {
		logger = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"})
	} else {
		logger = zerolog.New(os.Stderr)
	}
	logger = logger.Level(level).With().Timestamp().Logger()

	s := settings{dsn: *dsn, failListener: *failListener, adminToken: *adminToken}
	if s.traces, s.prettyTraces, err = traceOutput(*trace, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "http-demo: -trace:", err)
		os.Exit(2)
	}
	app := fx.New(
		appOptions(s, logger),
		serve(*addr),
	)
	if err := app.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "http-demo:", err)
		os.Exit(1)
	}
	app.Run() // until SIGINT or SIGTERM; exits 1 if start or stop fails
}

func envBool(key string) bool {
	b, _ := strconv.ParseBool(os.Getenv(key))
	return b
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

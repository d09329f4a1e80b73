# outbox — transactional outbox for Go. Run `make help` for the targets.

GO      ?= go
# Every module of the workspace, read from go.work.
MODULES := $(shell awk '/^[[:space:]]*\.\//{sub("^\\./", "", $$1); print $$1}' go.work)
RACE    ?= -race
TESTFLAGS ?=
# go test's own default (10m) is shorter than the integration suite takes on a loaded 2-core machine.
TEST_TIMEOUT ?= 25m
TORTURE_EVENTS ?= 20000
TORTURE_SQLITE_EVENTS ?= 5000
# `make chaos`: events per run, and flags for every run (CI: a short lease).
CHAOS_EVENTS ?= 20000
CHAOS_FLAGS ?=
# The clock skew of chaos's -skew run: worker clocks off by up to ±this.
CHAOS_SKEW ?= 5s

# golangci-lint, pinned; `make lint` installs it into ./bin (see .golangci.yml).
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := $(CURDIR)/bin/golangci-lint

.PHONY: help demo test lint check-core-deps bench tidy torture torture-bin chaos fuzz model release release-check

help: ## Show this help.
	@grep -E '^[a-zA-Z0-9_/-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-18s %s\n", $$1, $$2}'

demo: ## Run the demo on an embedded SQLite file (no server needed).
	cd samples/demo && $(GO) run . -db $(CURDIR)/bin/demo.db

# `make test` reads `go test -json` through scripts/testsummary.go, which
# prints what plain `go test` would plus a line per module with how many
# tests ran and how many skipped (a database that cannot be reached skips).
TESTSUMMARY := $(CURDIR)/bin/testsummary

test: check-core-deps ## Run every module's tests with the race detector; count the skipped ones.
	@mkdir -p bin && GOWORK=off $(GO) build -o $(TESTSUMMARY) scripts/testsummary.go
	@set -e; rc=$$(mktemp); trap 'rm -f $$rc' EXIT; for m in $(MODULES); do \
		echo "==> go test $(RACE) ./... in $$m"; \
		(cd $$m && { $(GO) test -json $(RACE) -count=1 -timeout $(TEST_TIMEOUT) $(TESTFLAGS) ./... 2>&1; echo $$? >$$rc; }) | $(TESTSUMMARY) $$m; \
		[ "$$(cat $$rc)" = 0 ]; \
	done

lint: check-core-deps bin/golangci-lint ## gofmt, go vet and golangci-lint on every module.
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do echo "==> go vet in $$m"; (cd $$m && $(GO) vet ./...); done
	@set -e; for m in $(MODULES); do echo "==> golangci-lint in $$m"; (cd $$m && $(GOLANGCI_LINT) run ./...); done

# Phony so that it is checked on every run: installs only when the binary is
# missing or reports a version other than GOLANGCI_LINT_VERSION.
.PHONY: bin/golangci-lint
bin/golangci-lint: ## Install the pinned golangci-lint into ./bin (GOLANGCI_LINT_VERSION=…).
	@if [ -x $(GOLANGCI_LINT) ] && [ "$$($(GOLANGCI_LINT) version --short 2>/dev/null)" = "$(patsubst v%,%,$(GOLANGCI_LINT_VERSION))" ]; then :; else \
		echo "==> installing golangci-lint $(GOLANGCI_LINT_VERSION) into bin/"; \
		GOBIN=$(CURDIR)/bin $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); \
	fi

check-core-deps: ## Fail if core (tests included) imports anything outside the standard library.
	@bad=$$(cd core && $(GO) list -deps -test -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./... | grep -v '^github.com/go-outbox/outbox/core' || true); \
	if [ -n "$$bad" ]; then echo "core must depend on the standard library only, found:"; echo "$$bad"; exit 1; fi; \
	if grep -q '^require' core/go.mod; then echo "core/go.mod must have no require"; exit 1; fi; \
	echo "core: standard library only"

# Sizes of `make bench`; see docs/benchmarks.md. BENCH_FLAGS adds or overrides flags.
BENCH_ARGS ?= -db all -duration 2s -drain-rows 1000000 -drain-rows-mysql 200000

bench: ## Benchmark the framework against raw SQL on every database and write docs/benchmarks.md.
	cd core && $(GO) test -run '^$$' -bench . -benchmem ./...
	cd bench && $(GO) test -run '^$$' -bench . -benchmem ./...
	cd bench && $(GO) run ./cmd/outbox-bench $(BENCH_ARGS) $(BENCH_FLAGS) -md $(CURDIR)/docs/benchmarks.md

.PHONY: bench-short
bench-short: ## The benchmark program with CI sizes (-short): proves it runs, no thresholds.
	cd bench && $(GO) run ./cmd/outbox-bench -short $(BENCH_FLAGS)

tidy: ## go mod tidy in every module.
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) mod tidy); done

.PHONY: demo-relay

demo-relay: ## Orders → outbox → NATS JetStream (BROKER=amqp: RabbitMQ) → consumer with the inbox; redeliveries injected; exits 0 if each order is applied once (SQLite; DSN=… for a server).
	@mkdir -p $(CURDIR)/bin
	cd samples/relay && $(GO) run . -broker '$(or $(BROKER),nats)' -db '$(or $(DSN),$(CURDIR)/bin/relay-demo.db)' $(RELAY_DEMO_FLAGS)

.PHONY: demo-multi demo-http

demo-multi: ## Run the fx sample with two data sources (two SQLite files; ORDERS_DSN=… BILLING_DSN=… for servers).
	cd samples/multi-ds && $(GO) run . -dir $(CURDIR)/bin/multi-ds \
		$(if $(ORDERS_DSN),-orders-dsn '$(ORDERS_DSN)') $(if $(BILLING_DSN),-billing-dsn '$(BILLING_DSN)')

demo-http: ## Run the fx REST sample on 127.0.0.1:8080 (ADDR=…; SQLite, DSN=… for a server; HTTP_DEMO_ADMIN_TOKEN=… allows replay on /admin/; HTTP_DEMO_TRACE=stdout prints the spans); Ctrl-C stops it.
	@mkdir -p $(CURDIR)/bin
	cd samples/http-demo && $(GO) run . -addr '$(or $(ADDR),127.0.0.1:8080)' -dsn '$(or $(DSN),$(CURDIR)/bin/http-demo.db)' $(HTTP_DEMO_FLAGS)

.PHONY: outboxctl

outboxctl: ## Build the operator CLI into bin/.
	cd cmd/outboxctl && $(GO) build -o $(CURDIR)/bin/outboxctl .

.PHONY: admin-screenshot
admin-screenshot: ## Regenerate docs/admin.png in headless Chromium.
	cd outboxhttp && OUTBOX_TEST_REQUIRE_BROWSER=1 OUTBOX_SCREENSHOT=$(CURDIR)/docs/admin.png $(GO) test -count=1 -run TestBrowser .

.PHONY: explain

explain: ## EXPLAIN the claim (recovery and fresh claim), the claim of some event types past another type's 900k rows, a tenant's admin queries, Stats and the purge at 1M rows and the ordered claim past 100k blocked keys on every database (OUTBOX_TEST_EXPLAIN_ROWS=… to change).
	cd integration && OUTBOX_TEST_EXPLAIN=1 $(GO) test -count=1 -timeout 30m -run '^TestExplain(Claim|TypedClaim|Tenant|Stats|BlockedKeys)$$' -v ./...

.PHONY: explain-10m

# Not in CI: it loads 1M and 10M rows per database (each table dropped once
# measured) and took 48 minutes on a shared 2-core machine.
explain-10m: ## Time and EXPLAIN the claim, recovery, ordered claim, Stats and purge at 1M and 10M rows on every database, and print the table of docs/benchmarks.md "10M rows" (OUTBOX_TEST_SCALE_ROWS=… to change).
	cd integration && OUTBOX_TEST_EXPLAIN=1 $(GO) test -count=1 -timeout 3h -run '^TestExplainScale$$' -v ./...

torture-bin:
	cd cmd/outbox-torture && $(GO) build -o $(CURDIR)/bin/outbox-torture .

torture: torture-bin ## Fault harness: SIGKILLs, connection cuts, failing listeners on SQLite, PostgreSQL and MariaDB; fails if an event is lost.
	$(CURDIR)/bin/outbox-torture -db sqlite -dsn $(CURDIR)/bin/torture.db -events $(TORTURE_SQLITE_EVENTS)
	$(CURDIR)/bin/outbox-torture -db postgres -events $(TORTURE_EVENTS)
	$(CURDIR)/bin/outbox-torture -db mysql -events $(TORTURE_EVENTS)

# Each run initdbs a PostgreSQL server of its own on free loopback ports (as
# the postgres user when root) and removes it at the end; the shared servers
# are not touched. See docs/guarantees.md, "Crashes of the database". The
# -skew run uses the shared server (its own database, as make torture) and
# leaves out the poison probe: under skew each of its take-overs waits
# Lease+MaxClockSkew (docs/guarantees.md, "Clocks"). The -relay runs start
# a broker of their own on a free loopback port (never the shared one), or,
# for RabbitMQ, a run's queue on the shared broker behind a proxy of their
# own; fail it mid-load and remove it at the end.
chaos: torture-bin ## The harness with the database crashing: failover to a synchronous and to an asynchronous replica, a crash with synchronous_commit=off, a MariaDB crash and restart; workers with clocks off by ±CHAOS_SKEW; events relayed to consumers applying them through the inbox, through NATS SIGKILLed and restarted, RabbitMQ with every connection cut, Kafka (kfake) SIGKILLed and restarted (CHAOS_EVENTS=…).
	$(CURDIR)/bin/outbox-torture -db postgres -failover sync -events $(CHAOS_EVENTS) $(CHAOS_FLAGS)
	$(CURDIR)/bin/outbox-torture -db postgres -failover async -events $(CHAOS_EVENTS) $(CHAOS_FLAGS)
	$(CURDIR)/bin/outbox-torture -db postgres -unsafe-commit -events $(CHAOS_EVENTS) $(CHAOS_FLAGS)
	$(CURDIR)/bin/outbox-torture -db mariadb -mariadb-restart -events $(CHAOS_EVENTS) $(CHAOS_FLAGS)
	$(CURDIR)/bin/outbox-torture -db postgres -skew $(CHAOS_SKEW) -poison-exit=false -events $(CHAOS_EVENTS) $(CHAOS_FLAGS)
	$(CURDIR)/bin/outbox-torture -db postgres -relay nats -events $(CHAOS_EVENTS) $(CHAOS_FLAGS)
	$(CURDIR)/bin/outbox-torture -db postgres -relay amqp -events $(CHAOS_EVENTS) $(CHAOS_FLAGS)
	$(CURDIR)/bin/outbox-torture -db postgres -relay kafka -events $(CHAOS_EVENTS) $(CHAOS_FLAGS)

# The CI size of the model runs with `make test` (go test ./internal/protomodel/ in core).
model: ## Check the claim protocol's model at its full sizes: every state, every invariant, each mutant caught; prints states, depth and time (OUTBOX_MODEL_TRACE=1: the mutants' traces).
	cd core && OUTBOX_MODEL_FULL=1 $(GO) test -count=1 -timeout 30m -v -run '^Test(Protocol|Mutants)$$' ./internal/protomodel/

# A count, not a duration: with a duration, go1.26's fuzz coordinator can report
# "context deadline exceeded" as a failure when the time runs out (golang/go#75804).
FUZZTIME ?= 200000x
fuzz: ## Run the fuzz targets briefly (FUZZTIME=…): envelope construction and the header codec.
	cd core && $(GO) test -run '^$$' -fuzz '^FuzzNewEnvelope$$' -fuzztime $(FUZZTIME) .
	cd core && $(GO) test -run '^$$' -fuzz '^FuzzHeaderCodec$$' -fuzztime $(FUZZTIME) ./sqlstore

release: ## Tag core, point the other modules at it, tag them, write them as a module proxy in bin/proxy (VERSION=vX.Y.Z; DRY_RUN=1 to preview; PROXY_DIR=…). Never pushes.
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=vX.Y.Z [DRY_RUN=1]"; exit 1; }
	@GO='$(GO)' DRY_RUN='$(DRY_RUN)' PROXY_DIR='$(PROXY_DIR)' bash scripts/release.sh '$(VERSION)'

release-check: ## Release HEAD into a throwaway clone, go get adapters/gorm and fxmodule from its proxy in a fresh module, tidy, run the GORM quick start to a delivered event.
	cd scripts/modproxy && GOWORK=off $(GO) vet ./...
	@GO='$(GO)' bash scripts/release-check.sh $(VERSION)

# The pinned-horizon benchmark: 4 runs of PINNED_DURATION each (about 45
# minutes with the defaults); see docs/benchmarks.md, "Pinned horizon".
PINNED_DURATION ?= 10m

.PHONY: bench-long
bench-long: ## The pinned-horizon benchmark on PostgreSQL (4 runs of PINNED_DURATION=10m; not in CI).
	cd bench && $(GO) run ./cmd/outbox-bench -db pgx -scenario pinned-horizon -pinned-duration $(PINNED_DURATION) $(BENCH_FLAGS)

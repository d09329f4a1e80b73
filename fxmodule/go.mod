module github.com/go-outbox/outbox/fxmodule

go 1.26.0

require (
	github.com/go-outbox/outbox/core v0.0.0
	github.com/go-outbox/outbox/outboxhttp v0.0.0
	github.com/rs/zerolog v1.35.1
	go.uber.org/fx v1.24.0
	go.uber.org/goleak v1.3.0
	modernc.org/sqlite v1.61.1
)

require (
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	go.uber.org/dig v1.19.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.26.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	modernc.org/libc v1.79.0 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
)

replace github.com/go-outbox/outbox/core => ../core

replace github.com/go-outbox/outbox/outboxhttp => ../outboxhttp

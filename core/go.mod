module github.com/go-outbox/outbox/core

go 1.26.0

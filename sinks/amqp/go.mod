module github.com/go-outbox/outbox/sinks/amqp

go 1.26.0

require (
	github.com/go-outbox/outbox/core v0.0.0
	github.com/rabbitmq/amqp091-go v1.16.0
	go.uber.org/goleak v1.3.0
)

replace github.com/go-outbox/outbox/core => ../../core

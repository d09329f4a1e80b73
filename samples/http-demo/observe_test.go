package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-outbox/outbox/core/outboxtest"
)

func TestMetricsAfterAnOrder(t *testing.T) {
	d := startDemo(t, settings{})
	o := d.placeOrder()
	d.eventually("the order shipped", func() bool { return d.order(o.ID).Status == "shipped" })
	var body string
	d.eventually("outbox_delivered_total 1 on /metrics", func() bool {
		resp := d.send("GET", "/metrics", "")
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		body = string(raw)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, `outbox_delivered_total{datasource="default",event_type="OrderPlaced"} 1`)
	})
	for _, want := range []string{
		`outbox_events_written_total{datasource="default",event_type="OrderPlaced"} 1`,
		`# TYPE outbox_delivery_seconds histogram`,
		`outbox_delivery_seconds_bucket{datasource="default",event_type="OrderPlaced",result="done",le="+Inf"} 1`,
		`outbox_delivery_seconds_count{datasource="default",event_type="OrderPlaced",result="done"} 1`,
		`outbox_commit_to_delivery_seconds_bucket{datasource="default",event_type="OrderPlaced",le="0.005"}`,
		`outbox_commit_to_delivery_seconds_count{datasource="default",event_type="OrderPlaced"} 1`,
		`outbox_pending{datasource="default"}`, // sampled at Start
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// span is the part of the stdout exporter's JSON the test reads.
type span struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	SpanKind    int
}

func TestTheDeliverySpanContinuesTheRequest(t *testing.T) {
	traces := &outboxtest.LogBuffer{}
	d := startDemo(t, settings{traces: traces})
	o := d.placeOrder()
	d.eventually("the order shipped", func() bool { return d.order(o.ID).Status == "shipped" })
	var request, delivery *span
	d.eventually("the request's and the delivery's spans", func() bool {
		request, delivery = nil, nil
		dec := json.NewDecoder(strings.NewReader(traces.String()))
		for {
			var s span
			if err := dec.Decode(&s); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				break
			}
			switch s.Name {
			case "POST /orders":
				request = &s
			case "process OrderPlaced":
				delivery = &s
			}
		}
		return request != nil && delivery != nil
	})
	if delivery.Parent.TraceID != request.SpanContext.TraceID || delivery.Parent.SpanID != request.SpanContext.SpanID {
		t.Errorf("delivery span's parent %+v, want the request's span %+v", delivery.Parent, request.SpanContext)
	}
}

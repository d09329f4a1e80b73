package main

import (
	"testing"
	"time"
)

// The workers' clock offsets spread evenly from -S to +S.
func TestSkewOffsets(t *testing.T) {
	c := config{skew: 5 * time.Second, workers: 3}
	want := []time.Duration{-5 * time.Second, 0, 5 * time.Second}
	for id, w := range want {
		if got := skewOffset(c, id); got != w {
			t.Errorf("worker %d: offset %s, want %s", id, got, w)
		}
	}
}

// A claim that takes a row over reads the owner's process and clock
// offset from its owner id; another program's owner id is not read.
func TestSkewOwnerRoundTrip(t *testing.T) {
	s := newSkew(config{skew: time.Second, workerID: 2, clockOffset: -1500 * time.Millisecond}, nil, 4242)
	owner := s.owner()
	pid, offset, ok := parseOwner(owner)
	if !ok || pid != 4242 || offset != -1500*time.Millisecond {
		t.Fatalf("parseOwner(%q) = %d, %s, %v; want 4242, -1.5s, true", owner, pid, offset, ok)
	}
	if _, _, ok := parseOwner("host-12-abcdef"); ok {
		t.Fatal("parseOwner read an owner id that is not a worker's")
	}
}

// The stored timestamps of every dialect read as the same instant.
func TestSkewScanTime(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 678901000, time.UTC)
	for _, v := range []any{at, at.UnixMicro(), "2030-01-02 03:04:05.678901", []byte("2030-01-02 03:04:05.678901")} {
		if got, ok := scanTime(v); !ok || !got.Equal(at) {
			t.Errorf("scanTime(%v) = %v, %v; want %v", v, got, ok, at)
		}
	}
}

package outbox

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

// crockford is the Crockford base32 alphabet used by ULIDs.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulidGenerator produces monotonic ULIDs: 26-character, lexicographically
// sortable identifiers made of a 48-bit millisecond timestamp and 80 bits of
// randomness. Within one millisecond (or if the clock steps backwards) the
// random part is incremented, so ids from one generator are strictly
// increasing. It is safe for concurrent use. The zero value is not usable;
// call newULIDGenerator.
type ulidGenerator struct {
	mu     sync.Mutex
	clock  Clock
	lastMS uint64
	hi     uint16 // top 16 bits of the 80-bit random part
	lo     uint64 // low 64 bits of the random part
}

// newULIDGenerator returns a generator reading time from clock (SystemClock if nil).
func newULIDGenerator(clock Clock) *ulidGenerator {
	if clock == nil {
		clock = SystemClock
	}
	return &ulidGenerator{clock: clock}
}

var defaultULIDs = newULIDGenerator(nil)

// NewULID returns a new monotonic ULID from the process-wide generator.
func NewULID() string { return defaultULIDs.New() }

// New returns the next ULID.
func (g *ulidGenerator) New() string {
	ms := uint64(g.clock.Now().UnixMilli())
	g.mu.Lock()
	if ms <= g.lastMS {
		ms = g.lastMS
		g.lo++
		if g.lo == 0 {
			g.hi++
			if g.hi == 0 { // 80-bit overflow within one millisecond: move to the next one
				ms++
				g.reseed()
			}
		}
	} else {
		g.reseed()
	}
	g.lastMS = ms
	hi, lo := g.hi, g.lo
	g.mu.Unlock()
	return encodeULID(ms, hi, lo)
}

// reseed draws fresh randomness, leaving headroom so increments rarely overflow.
func (g *ulidGenerator) reseed() {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("outbox: crypto/rand failed: " + err.Error())
	}
	g.hi = binary.BigEndian.Uint16(b[:2]) & 0x7fff
	g.lo = binary.BigEndian.Uint64(b[2:])
}

func encodeULID(ms uint64, hi uint16, lo uint64) string {
	// 128 bits: 48 bits time | 16 bits hi | 64 bits lo, written as 26 base32 digits
	// (the first digit carries only 3 bits).
	var out [26]byte
	// Work on two 64-bit halves: a = time(48) | hi(16), b = lo(64).
	a := ms<<16 | uint64(hi)
	b := lo
	for i := 25; i >= 0; i-- {
		out[i] = crockford[b&31]
		// shift the 128-bit (a,b) right by 5
		b = b>>5 | a<<59
		a >>= 5
	}
	return string(out[:])
}

// ULIDTime returns the timestamp embedded in a ULID, and false if id is not a
// well-formed ULID.
func ULIDTime(id string) (time.Time, bool) {
	if len(id) != 26 || id[0] > '7' {
		return time.Time{}, false
	}
	var ms uint64
	for i := 0; i < 10; i++ {
		v := crockfordValue(id[i])
		if v < 0 {
			return time.Time{}, false
		}
		ms = ms<<5 | uint64(v)
	}
	for i := 10; i < 26; i++ {
		if crockfordValue(id[i]) < 0 {
			return time.Time{}, false
		}
	}
	// The first digit holds 3 bits and the next nine 5 each: the 48-bit time.
	return time.UnixMilli(int64(ms)).UTC(), true
}

func crockfordValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'Z':
		for i := 10; i < 32; i++ {
			if crockford[i] == c {
				return i
			}
		}
	}
	return -1
}

package outboxmem

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestFirstN(t *testing.T) {
	byValue := func(a, b *row) int { return cmp.Compare(a.seq, b.seq) }
	for _, size := range []int{0, 1, 2, 7, 100, 1000} {
		for _, n := range []int{-1, 0, 1, 3, 50, 2000} {
			rows := make([]*row, size)
			for i := range rows {
				rows[i] = &row{seq: rand.Int64N(50)} // with ties
			}
			want := slices.Clone(rows)
			slices.SortStableFunc(want, byValue)
			want = want[:max(0, min(n, size))]
			got := firstN(slices.Clone(rows), n, byValue)
			if !slices.EqualFunc(got, want, func(a, b *row) bool { return a.seq == b.seq }) {
				t.Fatalf("size %d, n %d: got %d rows, not the n first in order", size, n, len(got))
			}
		}
	}
}

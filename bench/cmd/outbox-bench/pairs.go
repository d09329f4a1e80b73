package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// How a scenario's ratio is measured: in pairs of runs, one of the measured
// side and one of each baseline, back to back, alternating which goes
// first. A pair's ratio is the measured side's rate over the fastest
// baseline of the same pair, and the scenario reports the pair whose ratio
// is the median (the lower middle one of an even number).
//
// Why not the best run of each side: on a shared machine two runs of one
// side a minute apart differ by more (±15 %) than the gaps measured here,
// and the best of each side compares the luckiest run of one with the
// luckiest of the other; a slow minute that hits one side makes the ratio
// wrong either way. The runs of a pair are seconds apart, so the load they
// meet is about the same, and the median ignores the pairs a burst of load
// split.

// pairResult is the median pair of a scenario and every pair's ratio.
type pairResult struct {
	measured, base run
	// ratios are in the order the pairs ran: the first, third, … ran the
	// measured side first, so an effect of the order shows.
	ratios []float64
}

// measurePairs runs n pairs (at least one) of measured against baselines:
// side runs the side of that name.
func measurePairs(n int, measured string, baselines []string, side func(name string) (run, error)) (pairResult, error) {
	type pair struct {
		measured, base run
		ratio          float64
	}
	pairs := make([]pair, max(n, 1))
	for i := range pairs {
		order := append([]string{measured}, baselines...)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		p := &pairs[i]
		for _, name := range order {
			r, err := side(name)
			if err != nil {
				return pairResult{}, fmt.Errorf("(%s): %w", name, err)
			}
			switch {
			case name == measured:
				p.measured = r
			case r.rate() > p.base.rate() || p.base.n == 0:
				p.base = r
			}
		}
		if p.base.rate() > 0 {
			p.ratio = p.measured.rate() / p.base.rate()
		}
	}
	var res pairResult
	for _, p := range pairs {
		res.ratios = append(res.ratios, p.ratio)
	}
	slices.SortFunc(pairs, func(a, b pair) int { return cmp.Compare(a.ratio, b.ratio) })
	med := pairs[(len(pairs)-1)/2]
	res.measured, res.base = med.measured, med.base
	return res, nil
}

// addPairs runs n pairs of a scenario (see measurePairs) and adds its
// median pair to rep; baseNote, when set, is added to the baseline's note.
func (rep *report) addPairs(db, scenario string, conc, n int, measured string, baselines []string, baseNote string, side func(name string) (run, error)) error {
	res, err := measurePairs(n, measured, baselines, side)
	if err != nil {
		return fmt.Errorf("%s %w", scenario, err)
	}
	if baseNote != "" {
		res.base.note = strings.TrimPrefix(res.base.note+","+baseNote, ",")
	}
	rep.add(result{db: db, scenario: scenario, conc: conc, fw: res.measured, raw: res.base, rssKB: peakRSSKB(), ratios: res.ratios})
	return nil
}

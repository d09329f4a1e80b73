package main

import (
	"cmp"
	"fmt"
	"slices"
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

// measurePairs runs n pairs (at least one) of measured against baselines
// (side runs the side of that name) and returns the median pair: fw is
// its measured run, raw its fastest baseline, and ratios every pair's
// ratio, in the order the pairs ran (the first, third, … ran the measured
// side first, so an effect of the order shows).
func measurePairs(n int, measured string, baselines []string, side func(name string) (run, error)) (result, error) {
	pairs := make([]result, max(n, 1))
	ratios := make([]float64, len(pairs))
	for i := range pairs {
		order := append([]string{measured}, baselines...)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		p := &pairs[i]
		for _, name := range order {
			r, err := side(name)
			if err != nil {
				return result{}, fmt.Errorf("(%s): %w", name, err)
			}
			switch {
			case name == measured:
				p.fw = r
			case r.rate() > p.raw.rate() || p.raw.n == 0:
				p.raw = r
			}
		}
		ratios[i] = p.ratio()
	}
	slices.SortFunc(pairs, func(a, b result) int { return cmp.Compare(a.ratio(), b.ratio()) })
	med := pairs[(len(pairs)-1)/2]
	med.ratios = ratios
	return med, nil
}

// addPairs runs n pairs of a scenario (see measurePairs) and adds its
// median pair to rep; baseNote, when set, is added to the baseline's note.
func (rep *report) addPairs(db, scenario string, conc, n int, measured string, baselines []string, baseNote string, side func(name string) (run, error)) error {
	r, err := measurePairs(n, measured, baselines, side)
	if err != nil {
		return fmt.Errorf("%s %w", scenario, err)
	}
	if baseNote != "" {
		r.raw.addNote(baseNote)
	}
	r.db, r.scenario, r.conc, r.rssKB = db, scenario, conc, peakRSSKB()
	rep.add(r)
	return nil
}

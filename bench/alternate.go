package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// measureAlternating is the measuring loop of the runners that start a
// program per measurement (bench proxy, bench http2): for each repetition
// 1..reps and, within it, each load point 0..points-1, it measures every
// arm whose ArmInfo in arms is not skipped, the arms alternating within
// each in armOrder's balanced order (the given order in odd repetitions,
// reversed in even ones). measure makes one measurement of arm i and keeps its
// result. An arm whose measurement in the first round (rep 1, point 0)
// fails with a *startError (a tool missing, a backend that would fall
// back: it cannot run here) is skipped with that reason instead of failing
// the run: its ArmInfo says why, a note too, and lost is told the
// measurements it will not make. Any other error ends the run, as does a
// first round that measured no arm; what names the runner in that error.
func measureAlternating(ctx context.Context, what string, arms []ArmInfo, notes *[]string, progress io.Writer, reps, points int,
	measure func(i, point, rep int) error, lost func(n int)) error {
	for rep := 1; rep <= reps; rep++ {
		for point := range points {
			first, measured := rep == 1 && point == 0, 0
			for _, i := range armOrder(len(arms), rep) {
				if arms[i].Skipped != "" {
					continue
				}
				err := measure(i, point, rep)
				var se *startError
				if first && errors.As(err, &se) && ctx.Err() == nil {
					arms[i].Skipped = se.Error()
					*notes = append(*notes, skippedNote(arms[i].Name, se.Error(), progress))
					lost(reps * points)
					continue
				}
				if err != nil {
					return err
				}
				measured++
			}
			if first && measured == 0 {
				return fmt.Errorf("bench: no %s arm can run", what)
			}
		}
	}
	return nil
}

// armOrder returns the order in which n arms (indices 0..n-1, in the
// order asked for) are measured at each load point of repetition rep
// (from 1): the given order in odd repetitions, reversed in even ones
// (ABC CBA ABC …). Over each pair of repetitions an arm's two positions
// add up to n-1 for every arm, so a drift of the machine's speed that is
// linear over the pair adds the same to each arm's two measurements
// instead of favouring the arm measured last; see the package doc.
func armOrder(n, rep int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = i
		if rep%2 == 0 {
			o[i] = n - 1 - i
		}
	}
	return o
}

package redirect

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestReadYieldPlan: a connection yields and checks on its first read;
// while checks find the next request there, it yields before two reads in
// three (never three in a row) and checks one yield in yieldCheckEvery;
// after a check that finds nothing, it reads yieldSkipReads times without
// yielding, then checks again.
func TestReadYieldPlan(t *testing.T) {
	g := NewWithT(t)
	type step struct{ yield, check bool }
	var (
		yc = step{true, true}
		y  = step{true, false}
		n  = step{false, false}
	)
	run := func(r *readYield, reads int) (steps []step) {
		for range reads {
			yield, check := r.plan()
			steps = append(steps, step{yield, check})
		}
		return steps
	}

	var r readYield
	g.Expect(run(&r, 1)).To(Equal([]step{yc}), "the first read yields and checks")
	r.checked(true)
	g.Expect(run(&r, 5)).To(Equal([]step{y, n, y, y, n}), "at most %d yields in a row", yieldStreak)

	r = readYield{}
	run(&r, 1)
	r.checked(true)
	yields, checks, row := 0, 0, 1 // the checked yield began the row
	for i := range 3 * yieldCheckEvery {
		yield, check := r.plan()
		if !yield {
			row = 0
			continue
		}
		yields++
		row++
		g.Expect(row).To(BeNumerically("<=", yieldStreak), "read %d", i)
		if check {
			checks++
			g.Expect(yields).To(Equal(yieldCheckEvery), "the check is the %dth yield after the last", yieldCheckEvery)
			yields = 0
			r.checked(true)
		}
	}
	g.Expect(checks).To(Equal(2), "%d reads are %d yields", 3*yieldCheckEvery, 2*yieldCheckEvery)

	r = readYield{}
	run(&r, 1)
	r.checked(false)
	steps := run(&r, yieldSkipReads+2)
	g.Expect(steps[:yieldSkipReads]).To(HaveEach(n), "an idle connection reads %d times without yielding", yieldSkipReads)
	g.Expect(steps[yieldSkipReads:]).To(Equal([]step{yc, yc}), "then checks again (and again, until a check finds a request)")
}

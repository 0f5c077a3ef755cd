package gate

import (
	"strconv"
	"testing"
)

// BenchmarkVerify is what a guess costs, at each cost a hash may have: a
// wrong password checked against a valid hash, on one core. Its
// guesses/s/core is what an attacker who has the hash gets per core of
// the same kind (docs/security.md), and what a flood of posts costs the
// redirector's render budget.
func BenchmarkVerify(b *testing.B) {
	for cost := MinCost; cost <= MaxCost; cost++ {
		b.Run("cost="+strconv.Itoa(cost), func(b *testing.B) {
			hash, err := Hash([]byte("correct horse battery staple"), cost)
			if err != nil {
				b.Fatal(err)
			}
			wrong := []byte("Tr0ub4dor&3")
			b.ResetTimer()
			for b.Loop() {
				if Verify(hash, wrong) {
					b.Fatal("a wrong password matched")
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "guesses/s/core")
		})
	}
}

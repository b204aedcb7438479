package seed

import (
	"math/bits"
	"testing"
)

// TestMixAvalanche checks that flipping one input bit flips about half the output bits,
// so (seed, epoch, index) neighbours get unrelated streams.
func TestMixAvalanche(t *testing.T) {
	var total, n int
	for a := uint64(0); a < 64; a++ {
		for bit := 0; bit < 64; bit++ {
			total += bits.OnesCount64(Mix(a, 7) ^ Mix(a^1<<bit, 7))
			total += bits.OnesCount64(Mix(7, a) ^ Mix(7, a^1<<bit))
			n += 2
		}
	}
	if avg := float64(total) / float64(n); avg < 30 || avg > 34 {
		t.Errorf("one flipped input bit flips %.1f output bits on average, want about 32", avg)
	}
	if Mix(1, 2) == Mix(2, 1) {
		t.Error("Mix is symmetric")
	}
}

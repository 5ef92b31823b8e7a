package leiden

import (
	"math/bits"
)

// rng reproduces rand_xorshift 0.3 XorShiftRng as driven by rand 0.8.5; the
// exact stream matters because every shuffle and refinement draw must match
// graspologic-native for partition compatibility.
type rng struct {
	x, y, z, w uint32
}

// newRNG mirrors SeedableRng::seed_from_u64: a PCG32 expands the seed into
// the four state words.
func newRNG(seed uint64) *rng {
	const mul = 6364136223846793005
	const inc = 11634580027462260723
	state := seed
	var words [4]uint32
	for i := range words {
		state = state*mul + inc
		xorshifted := uint32(((state >> 18) ^ state) >> 27)
		rot := int(state >> 59)
		words[i] = bits.RotateLeft32(xorshifted, -rot)
	}
	if words == [4]uint32{} {
		// XorShift must not start from the all-zero state.
		words = [4]uint32{0x0BAD5EED, 0x0BAD5EED, 0x0BAD5EED, 0x0BAD5EED}
	}
	return &rng{x: words[0], y: words[1], z: words[2], w: words[3]}
}

func (r *rng) nextU32() uint32 {
	x := r.x
	t := x ^ (x << 11)
	r.x, r.y, r.z = r.y, r.z, r.w
	w := r.w
	r.w = w ^ (w >> 19) ^ (t ^ (t >> 8))
	return r.w
}

func (r *rng) nextU64() uint64 {
	lo := uint64(r.nextU32())
	hi := uint64(r.nextU32())
	return hi<<32 | lo
}

// genRange is rand's widening-multiply rejection sampler for usize ranges;
// its "zone" is a conservative approximation, so the rejection pattern (and
// hence the number of words consumed) must be copied, not improved.
func (r *rng) genRange(n int) int {
	rng := uint64(n)
	zone := (rng << bits.LeadingZeros64(rng)) - 1
	for {
		v := r.nextU64()
		hi, lo := bits.Mul64(v, rng)
		if lo <= zone {
			return int(hi)
		}
	}
}

func (r *rng) genF64() float64 {
	return float64(r.nextU64()>>11) * (1.0 / float64(uint64(1)<<53))
}

// shuffle is the library's "swap every position with a uniform one" loop,
// which is biased but is what fixes the node visiting order.
func (r *rng) shuffle(p []int32) {
	n := len(p)
	for i := 0; i < n; i++ {
		j := r.genRange(n)
		p[i], p[j] = p[j], p[i]
	}
}

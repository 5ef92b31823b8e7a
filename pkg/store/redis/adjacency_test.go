package redis

import "testing"

// TestAdjacencyFieldRoundTrip: every field of an adjacency hash reads
// back as the edge id it was written for, from either endpoint, also when
// entity ids contain the separator (two edges may then spell one id) and
// when an id does not spell its endpoint as EdgeID would (stored whole);
// and the usual id is shortened by its endpoint.
func TestAdjacencyFieldRoundTrip(t *testing.T) {
	for _, c := range []struct {
		id, source, target string
		out, in            string // the fields
	}{
		{"a|r|b", "a", "b", "r|b", "a|r"},
		{"a|b|r|c", "a|b", "c", "r|c", "a|b|r"},
		{"a|b|r|c", "a", "b|r|c", "b|r|c", "a"},
		{"a||b", "a", "b", "|a||b", "a|"},
		{"|a|r|b", "", "b", "a|r|b", "||a|r|b"},
		{"x|r|y", "other", "else", "|x|r|y", "|x|r|y"},
		{"a|r|", "a", "", "r|", "a|r"},
	} {
		out, in := adjacencyField(c.id, c.source, true), adjacencyField(c.id, c.target, false)
		if out != c.out || in != c.in {
			t.Errorf("%q from %q to %q: fields %q and %q, want %q and %q", c.id, c.source, c.target, out, in, c.out, c.in)
		}
		if got := edgeOfField(out, c.source, true); got != c.id {
			t.Errorf("out field %q of %q reads as %q, want %q", out, c.source, got, c.id)
		}
		if got := edgeOfField(in, c.target, false); got != c.id {
			t.Errorf("in field %q of %q reads as %q, want %q", in, c.target, got, c.id)
		}
	}
}

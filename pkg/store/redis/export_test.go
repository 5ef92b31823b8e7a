package redis

// WithStripesAlways makes every apply watch stripes, however few heads it
// reads, so tests exercise the stripes with small documents.
func WithStripesAlways() Option { return func(s *Store) { s.watchHeadsMax = -1 } }

// StripeKey is the key of the stripe of an entity or edge id.
func StripeKey(prefix, tenant, id string) string {
	return keys{base: prefix + ":{" + tenant + "}:"}.stripe(stripeOf(id))
}

// WithBeforeWrite sets a function every attempt of an apply that writes
// calls with its number once it has read and planned, before its MULTI: a
// test writes there what the attempt must then find changed.
func WithBeforeWrite(fn func(attempt int)) Option { return func(s *Store) { s.beforeWrite = fn } }

// WithCoarseStripesAlways makes every apply that watches stripes watch
// coarse stripes, however few heads it reads.
func WithCoarseStripesAlways() Option { return func(s *Store) { s.watchCoarseMin = -1 } }

// CoarseKey is the key of the coarse stripe of an entity or edge id.
func CoarseKey(prefix, tenant, id string) string {
	return keys{base: prefix + ":{" + tenant + "}:"}.coarse(stripeOf(id) % coarseCount)
}

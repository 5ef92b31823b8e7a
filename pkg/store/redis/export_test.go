package redis

// WithStripesAlways makes every apply watch stripes, however few heads it
// reads, so tests exercise the stripes with small documents.
func WithStripesAlways() Option { return func(s *Store) { s.watchHeadsMax = -1 } }

// StripeKey is the key of the stripe of an entity or edge id.
func StripeKey(prefix, tenant, id string) string {
	return keys{base: prefix + ":{" + tenant + "}:"}.stripe(stripeOf(id))
}

package offline

import "time"

// SetNow replaces the gazetteer's clock.
func SetNow(g *CatalogGazetteer, now func() time.Time) { g.now = now }

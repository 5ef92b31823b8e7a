package query

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
)

// followerLog records what a DocFollower is told.
type followerLog struct{ calls []string }

func (f *followerLog) Following(live bool) {
	f.calls = append(f.calls, map[bool]string{true: "live", false: "not live"}[live])
}
func (f *followerLog) DocChanged(tenant, doc string) { f.calls = append(f.calls, tenant+"/"+doc) }

// TestDocFollowerToldOfEveryChange: the follower is told when the caches
// go live or not, of the document of every graph change followed (an
// applied one, a deletion, one naming no entity), and, for an event that
// cannot be read, that any document of the tenant may have changed.
func TestDocFollowerToldOfEveryChange(t *testing.T) {
	var c caches
	f := &followerLog{}
	c.docs = f
	c.setLive(true)
	for _, ev := range []events.GraphChanged{
		{Header: events.Header{Tenant: "acme"}, DocID: "INC-1", Version: 1, Contributed: []string{"incident:inc1"}},
		{Header: events.Header{Tenant: "acme"}, DocID: "INC-2", Version: 2, Deleted: true, Contributed: []string{"incident:inc2"}},
		{Header: events.Header{Tenant: "acme"}, DocID: "INC-3", Version: 1},
	} {
		data, err := events.Encode(&ev)
		require.NoError(t, err)
		_, err = c.graphChanged("acme", data)
		require.NoError(t, err)
	}
	_, err := c.graphChanged("acme", []byte("{not an event"))
	require.Error(t, err)
	c.setLive(false)
	require.Equal(t, []string{"live", "acme/INC-1", "acme/INC-2", "acme/INC-3", "acme/", "not live"}, f.calls)
}

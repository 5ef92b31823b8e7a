package extractor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/services/extractor"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// TestHandleRefusesOtherTenantsEvent: a document event whose tenant is not
// its subject's is refused permanently (dead-lettered) and extracts
// nothing; on its own tenant's subject it is extracted.
func TestHandleRefusesOtherTenantsEvent(t *testing.T) {
	bus := startBus(t)
	x, err := offline.New(offline.Config{})
	require.NoError(t, err)
	w, err := extractor.New(extractor.Config{Tokenizer: tok(t)}, bus, x, nil, nil)
	require.NoError(t, err)
	data, err := events.Encode(ownDoc(t, "acme", "PM-1", 1))
	require.NoError(t, err)
	m := &stream.Message{Subject: "kg.doc.changed.globex", Kind: events.KindDocChanged, Tenant: "globex", Data: data}
	err = w.Handle(t.Context(), m)
	require.ErrorIs(t, err, stream.ErrTenantMismatch)
	require.True(t, stream.IsPermanent(err))
	require.Empty(t, messages(t, bus, "kg.extracted.acme"))
	require.Empty(t, messages(t, bus, "kg.extracted.globex"))

	m.Subject, m.Tenant = "kg.doc.changed.acme", "acme"
	require.NoError(t, w.Handle(t.Context(), m))
	require.Len(t, messages(t, bus, "kg.extracted.acme"), 1)

	m.Data = []byte(`{"schema":1,`)
	err = w.Handle(t.Context(), m)
	require.ErrorIs(t, err, events.ErrInvalidEvent)
	require.True(t, stream.IsPermanent(err))
}

// TestReextractorRefusesOtherTenantsEvent: the same for the catalog
// re-extraction stage's graph events.
func TestReextractorRefusesOtherTenantsEvent(t *testing.T) {
	e := newRxEnv(t)
	data, err := events.Encode(&events.GraphChanged{Header: events.Header{Tenant: rxTenant}, DocID: "catalog", Version: 1,
		Touched: []string{"component:certmanager"}, ReceivedAt: time.Now()})
	require.NoError(t, err)
	m := &stream.Message{Subject: "kg.graph.changed.globex", Kind: events.KindGraphChanged, Tenant: "globex", Data: data}
	err = e.rx.Handle(t.Context(), m)
	require.ErrorIs(t, err, stream.ErrTenantMismatch)
	require.True(t, stream.IsPermanent(err))

	m.Subject, m.Tenant = "kg.graph.changed."+rxTenant, rxTenant
	require.NoError(t, e.rx.Handle(t.Context(), m), "a document never applied is nothing to re-extract")
}

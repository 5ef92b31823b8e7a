package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/stream"
)

// maxListedDeadLetters caps one listing of dead letters.
const maxListedDeadLetters = 200

// DeadLetterEntry is one dead letter as ops see it: where it failed, why,
// and its sequence in the stream (the handle for replay).
type DeadLetterEntry struct {
	stream.DeadLetter
	// StreamSequence is the dead letter's own sequence in the stream.
	StreamSequence uint64 `json:"stream_sequence"`
}

// DeadLetterList is the body of GET /v1/status/deadletters.
type DeadLetterList struct {
	DeadLetters []DeadLetterEntry `json:"dead_letters"`
}

// tenantOf is the tenant token that ends an event subject.
func tenantOf(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

// DeadLetters lists the dead letters of tenant's events, oldest first (at
// most maxListedDeadLetters).
func (c *Collector) DeadLetters(ctx context.Context, tenant string) ([]DeadLetterEntry, error) {
	out := []DeadLetterEntry{}
	if c.bus == nil {
		return out, nil
	}
	n, err := c.bus.DeadLetters(ctx)
	if err != nil || n == 0 {
		return out, err
	}
	cons, err := c.bus.JetStream().OrderedConsumer(ctx, c.bus.StreamName(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.bus.Subjects().Prefix + ".dlq.>"}})
	if err != nil {
		return nil, fmt.Errorf("reading dead letters: %w", err)
	}
	batch, err := cons.Fetch(int(min(n, maxListedDeadLetters)), jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		return nil, fmt.Errorf("reading dead letters: %w", err)
	}
	for m := range batch.Messages() {
		var dl stream.DeadLetter
		if err := json.Unmarshal(m.Data(), &dl); err != nil {
			continue
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("reading dead letter metadata: %w", err)
		}
		if tenantOf(dl.Subject) != tenant {
			continue
		}
		dl.Data, dl.RawData = nil, ""
		out = append(out, DeadLetterEntry{DeadLetter: dl, StreamSequence: md.Sequence.Stream})
	}
	return out, batch.Error()
}

// ErrNotDeadLetter means a sequence names no dead letter of the caller's tenant.
var ErrNotDeadLetter = errors.New("no such dead letter")

// Replay publishes a dead letter's original event again on its original
// subject (under a new message id, so deduplication does not drop it) and
// then removes the dead letter. The stage's handler is idempotent, so a
// replay that races with another changes nothing twice.
func (c *Collector) Replay(ctx context.Context, tenant string, seq uint64) error {
	if c.bus == nil {
		return ErrNotDeadLetter
	}
	st, err := c.bus.JetStream().Stream(ctx, c.bus.StreamName())
	if err != nil {
		return fmt.Errorf("opening stream: %w", err)
	}
	raw, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return ErrNotDeadLetter
	}
	if err != nil {
		return fmt.Errorf("reading message %d: %w", seq, err)
	}
	var dl stream.DeadLetter
	if !strings.HasPrefix(raw.Subject, c.bus.Subjects().Prefix+".dlq.") || json.Unmarshal(raw.Data, &dl) != nil || tenantOf(dl.Subject) != tenant {
		return ErrNotDeadLetter
	}
	msg := nats.NewMsg(dl.Subject)
	if dl.Data != nil {
		msg.Data = dl.Data
	} else {
		msg.Data = []byte(dl.RawData)
	}
	msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s/replay/%d", dl.MsgID, seq))
	if _, err := c.bus.JetStream().PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("republishing dead letter %d: %w", seq, err)
	}
	if err := st.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("removing replayed dead letter %d: %w", seq, err)
	}
	c.log.Info("dead letter replayed", "stage", dl.Stage, "subject", dl.Subject, "sequence", seq)
	return nil
}

// DeadLetterHandler serves, for admins of the caller's tenant,
// GET /v1/status/deadletters and POST /v1/status/deadletters/{seq}/replay.
func (c *Collector) DeadLetterHandler(a *auth.Authenticator) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status/deadletters", func(w http.ResponseWriter, r *http.Request) {
		caller, _ := auth.CallerFrom(r.Context())
		if !caller.Admin {
			httpapi.WriteError(w, c.log, httpapi.Errorf(http.StatusForbidden, "forbidden", "dead letters are for admins"))
			return
		}
		list, err := c.DeadLetters(r.Context(), caller.Tenant)
		if err != nil {
			httpapi.WriteError(w, c.log, httpapi.Errorf(http.StatusServiceUnavailable, "status_unavailable", "%v", err))
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, DeadLetterList{DeadLetters: list})
	})
	mux.HandleFunc("POST /v1/status/deadletters/{seq}/replay", func(w http.ResponseWriter, r *http.Request) {
		caller, _ := auth.CallerFrom(r.Context())
		if !caller.Admin {
			httpapi.WriteError(w, c.log, httpapi.Errorf(http.StatusForbidden, "forbidden", "replaying dead letters is for admins"))
			return
		}
		seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
		if err != nil || seq == 0 {
			httpapi.WriteError(w, c.log, httpapi.Errorf(http.StatusBadRequest, "invalid_param", "seq must be a positive stream sequence"))
			return
		}
		switch err := c.Replay(r.Context(), caller.Tenant, seq); {
		case errors.Is(err, ErrNotDeadLetter):
			httpapi.WriteError(w, c.log, httpapi.Errorf(http.StatusNotFound, "not_found", "no dead letter %d", seq))
		case err != nil:
			httpapi.WriteError(w, c.log, httpapi.Errorf(http.StatusServiceUnavailable, "replay_failed", "%v", err))
		default:
			httpapi.WriteJSON(w, http.StatusOK, map[string]any{"replayed": seq})
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, c.log, httpapi.Errorf(http.StatusNotFound, "not_found", "no route %s %s", r.Method, r.URL.Path))
	})
	return httpapi.Authenticated(a, c.log, mux)
}

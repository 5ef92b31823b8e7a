package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/kgstream/kgstream/pkg/events"
)

// GiveWay makes a background stage wait while the stages a change must
// cross before it is readable have a backlog. The graph is what queries
// answer from; reports and vectors summarise it and are debounced anyway.
// When every stage shares the same cores (the all-in-one process), a
// report rewrite or a vector batch that runs during a burst of documents
// takes the CPU and the store's write lock from the extractor and the
// resolver, and every document waits longer before it is readable. A
// stage that gives way runs later, on larger batches: less work in all,
// since its batches coalesce repeated entities and communities.
//
// The wait is bounded: after Max the stage takes its next batch whatever
// the backlog, so a sustained stream never starves it. Separate services
// on separate machines have nothing to give: leave GiveWay unset there.
type GiveWay struct {
	// Stages are the durables (stage names) whose backlog comes first.
	Stages []string
	// Above is the backlog, waiting plus in flight summed over Stages, at
	// or below which the stage goes on (default 64).
	Above uint64
	// Max bounds one wait (default 2s).
	Max time.Duration
	// Poll is how often the backlog is read while waiting (default 50ms;
	// the bus reads it from the server at most once per Poll for all its
	// stages).
	Poll time.Duration
}

func (g *GiveWay) setDefaults() {
	if g.Above == 0 {
		g.Above = 64
	}
	if g.Max == 0 {
		g.Max = 2 * time.Second
	}
	if g.Poll == 0 {
		g.Poll = 50 * time.Millisecond
	}
}

// Validate checks a GiveWay: at least one stage, no negative duration.
func (g GiveWay) Validate() error {
	if len(g.Stages) == 0 {
		return errors.New("stream: GiveWay needs at least one stage")
	}
	for _, s := range g.Stages {
		if s == "" {
			return errors.New("stream: GiveWay has an empty stage name")
		}
	}
	if g.Max < 0 || g.Poll < 0 {
		return errors.New("stream: GiveWay's Max and Poll must be >= 0")
	}
	return nil
}

// backlogs is the bus's last reading of every consumer's backlog, shared
// by the stages that give way so that several waiting stages cost one
// request to the server per Poll.
type backlogs struct {
	mu   sync.Mutex
	at   time.Time
	by   map[string]uint64
	err  error
	read singleflight.Group
}

// consumerBacklogs returns how many messages each consumer of the stream
// has waiting or in flight, read from the server at most once per maxAge
// (callers arriving during a reading share it).
func (b *Bus) consumerBacklogs(ctx context.Context, maxAge time.Duration) (map[string]uint64, error) {
	bl := &b.backlogs
	bl.mu.Lock()
	if !bl.at.IsZero() && time.Since(bl.at) < maxAge {
		defer bl.mu.Unlock()
		return bl.by, bl.err
	}
	bl.mu.Unlock()
	// Not cancelled with the first caller's context: the others share it.
	ch := bl.read.DoChan("", func() (any, error) {
		by, err := b.listBacklogs(context.WithoutCancel(ctx))
		bl.mu.Lock()
		bl.by, bl.err, bl.at = by, err, time.Now()
		bl.mu.Unlock()
		return by, err
	})
	select {
	case r := <-ch:
		by, _ := r.Val.(map[string]uint64)
		return by, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// listBacklogs reads every consumer's backlog (waiting plus in flight),
// by consumer name.
func (b *Bus) listBacklogs(ctx context.Context) (map[string]uint64, error) {
	by := map[string]uint64{}
	lister := b.stream.ListConsumers(ctx)
	for info := range lister.Info() {
		by[info.Name] = info.NumPending + uint64(info.NumAckPending)
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("listing consumers of %s: %w", b.cfg.Stream, err)
	}
	return by, nil
}

// stageKinds are the kinds a stage may consume: a stage consuming several
// has one consumer per kind, named by consumerName.
var stageKinds = []events.Kind{events.KindDocChanged, events.KindDocDeleted, events.KindDocACL, events.KindExtracted,
	events.KindGraphChanged, events.KindCommunitiesChanged, events.KindReportsChanged, events.KindReresolve, events.KindRecluster}

// backlogOf sums the backlogs of the consumers of the stages named. Only
// a stage's own consumers count: "extractor" covers "extractor" (and
// "extractor-doc_changed" were it to consume several kinds), not the
// stage "extractor-catalog". (Pending, for status, counts a stage with
// the durables named after it, so "reporter" covers "reporter-vectors".)
func backlogOf(by map[string]uint64, stages []string) uint64 {
	var n uint64
	for _, s := range stages {
		n += by[s]
		for _, k := range stageKinds {
			n += by[consumerName(s, stageKinds, k)]
		}
	}
	return n
}

// Backlog returns the messages the stages named have waiting or in flight,
// counted as GiveWay counts them (their own consumers only; see
// backlogOf), read from the server now.
func (b *Bus) Backlog(ctx context.Context, stages ...string) (uint64, error) {
	by, err := b.listBacklogs(ctx)
	if err != nil {
		return 0, err
	}
	return backlogOf(by, stages), nil
}

// GiveWay waits while the stages g names have more than g.Above messages
// waiting or in flight, for at most g.Max, and returns how long it waited.
// A backlog it cannot read (the server busy, a consumer not created yet)
// does not hold the caller. It returns at once when ctx ends. stage names
// the caller in kgstream_stage_yield_seconds_total.
func (b *Bus) GiveWay(ctx context.Context, stage string, g GiveWay) time.Duration {
	g.setDefaults()
	start := time.Now()
	deadline := start.Add(g.Max)
	for ctx.Err() == nil {
		by, err := b.consumerBacklogs(ctx, g.Poll)
		if err != nil || backlogOf(by, g.Stages) <= g.Above {
			break
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(g.Poll, left)):
		}
	}
	waited := time.Since(start)
	b.metrics.Yield.WithLabelValues(stage).Add(waited.Seconds())
	return waited
}

// giveWay is GiveWay for a stage configured with one.
func (b *Bus) giveWay(ctx context.Context, s *stage) {
	if s.GiveWay != nil {
		b.GiveWay(ctx, s.Stage, *s.GiveWay)
	}
}

// Yielder gives way again and again within one long piece of work (a
// background stage's batch that writes thousands of reports, say), so that
// a backlog of the stages g names that builds up while it runs holds it
// too, not only its next batch. All its waits together are bounded by g's
// Max, as one GiveWay is: the work is put off by at most that much,
// however many times it gives way.
type Yielder struct {
	b     *Bus
	stage string
	g     GiveWay
	left  time.Duration
}

// Yielder returns a Yielder of stage for g; a nil g gives one that never
// waits.
func (b *Bus) Yielder(stage string, g *GiveWay) *Yielder {
	y := &Yielder{b: b, stage: stage}
	if g != nil {
		y.g = *g
		y.g.setDefaults()
		y.left = y.g.Max
	}
	return y
}

// GiveWay waits while the stages have a backlog, within what is left of
// the Yielder's bound, and returns how long it waited.
func (y *Yielder) GiveWay(ctx context.Context) time.Duration {
	if y == nil || y.left <= 0 {
		return 0
	}
	g := y.g
	g.Max = y.left
	waited := y.b.GiveWay(ctx, y.stage, g)
	y.left -= waited
	return waited
}

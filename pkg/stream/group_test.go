package stream

import (
	"context"
	"errors"
	"testing"
)

// TestRunGroup: the first actor to return, failed or not, stops the others;
// the first failure is the group's error.
func TestRunGroup(t *testing.T) {
	boom := errors.New("boom")
	waiter := func(ctx context.Context) error { <-ctx.Done(); return nil }
	if err := RunGroup(t.Context(), waiter, func(context.Context) error { return boom }, waiter); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the failure", err)
	}
	if err := RunGroup(t.Context(), waiter, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("an actor that finished without failing: got %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := RunGroup(ctx, waiter, waiter); err != nil {
		t.Fatalf("a stopped group: got %v", err)
	}
	stopped := make(chan struct{})
	err := RunGroup(t.Context(), func(ctx context.Context) error {
		<-ctx.Done()
		close(stopped)
		return context.Cause(ctx)
	}, func(context.Context) error { return boom })
	<-stopped
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the first failure, not the one it caused", err)
	}
}

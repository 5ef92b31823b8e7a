//go:build integration

package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

// TestEvalAnswersAgainstAllInOne runs a two-question set over the seed
// postmortems and checks the per-mode table; a bad set or flag is refused.
func TestEvalAnswersAgainstAllInOne(t *testing.T) {
	a, err := app.Start(context.Background(), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		Quiet: 50 * time.Millisecond, MaxDelay: time.Second,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	ctx := t.Context()
	seed := "../../../shared/corpora/seed-postmortems/docs"
	if err := run(ctx, []string{"ingest", seed, "--doc-type", "incident", "--server", a.URL()}); err != nil {
		t.Fatalf("ingest: %v", err)
	}
	c := app.NewClient(a.URL(), "")
	if err := c.WaitFor(ctx, 30*time.Second, func() (bool, error) {
		var st struct {
			Applied int               `json:"applied"`
			Pending map[string]uint64 `json:"pending"`
		}
		err := c.Do(ctx, "GET", "/v1/status", "", nil, &st)
		return st.Applied == 10 && st.Pending["resolver"] == 0 && st.Pending["reporter"] == 0, err
	}); err != nil {
		t.Fatal(err)
	}
	set := filepath.Join(t.TempDir(), "q.json")
	if err := os.WriteFile(set, []byte(`[
	 {"id":"cert","corpus":"seed","question":"Why did the TLS certificate on the public ingress expire?","gold":["INC-101"],"fact":"DNS credentials"},
	 {"id":"search","corpus":"seed","question":"Why were search results empty?","gold":["INC-112"],"fact":"webhook timed out"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := runIO(ctx, []string{"eval", "answers", "--questions", set, "--server", a.URL(), "--modes", "local,basic"}, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("eval answers: %v\n%s", err, out.String())
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	for _, mode := range []string{"local", "basic"} {
		r := rows[mode]
		if len(r) < 6 || r[1] != "2" || r[2] != "2" || r[4] != "2" {
			t.Fatalf("%s: want both questions with gold@3 and fact:\n%s", mode, out.String())
		}
	}
	var ee *exitError
	if err := runIO(ctx, []string{"eval", "answers", "--server", a.URL()}, strings.NewReader(""), &out, &errOut); !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("no question set must be a usage error (exit 2), got %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"id":"x","question":"q","gold":[],"fact":"("}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := evalAnswers(ctx, &out, evalAnswersOptions{Questions: []string{bad}, Server: a.URL(), Modes: []string{"local"}}); err == nil {
		t.Fatal("a bad question set must be refused")
	}
}

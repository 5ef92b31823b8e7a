package app_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds every binary once per test run.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "kgstream-bin-")
		if buildErr != nil {
			return
		}
		root, _ := filepath.Abs("../../..")
		cmd := exec.Command("go", "build", "-o", binDir+"/",
			"./cmd/kgstream", "./services/gateway/cmd/gateway", "./services/extractor/cmd/extractor",
			"./services/resolver/cmd/resolver", "./services/clusterer/cmd/clusterer",
			"./services/reporter/cmd/reporter", "./services/query/cmd/query")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building binaries: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binDir
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
}

func startProc(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	p := &proc{name: name, cmd: cmd, log: logf}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			data, _ := os.ReadFile(logf.Name())
			t.Logf("--- %s log ---\n%s", name, tail(string(data), 4000))
		}
		logf.Close()
	})
	return p
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func waitReady(t *testing.T, addr string, p *proc) {
	t.Helper()
	eventually(t, 60*time.Second, p.name+" ready", func() bool {
		if p.cmd.ProcessState != nil {
			data, _ := os.ReadFile(p.log.Name())
			t.Fatalf("%s exited: %s", p.name, tail(string(data), 4000))
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func deleteStream(t testing.TB, name string) {
	nc, err := nats.Connect(natsURL())
	if err != nil {
		t.Logf("cleaning stream %s: %v", name, err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	_ = js.DeleteStream(context.Background(), name)
}

// TestCrashRecovery kills the all-in-one with SIGKILL while 500 documents
// are being ingested, starts it again on the same data directory, and checks
// that every accepted document ends up applied exactly once with no orphan.
func TestCrashRecovery(t *testing.T) {
	bin := binaries(t)
	data := t.TempDir()
	addr := freeAddr(t)
	up := func() *proc {
		p := startProc(t, "kgstream", filepath.Join(bin, "kgstream"), nil,
			"up", "--data", data, "--http", addr, "--ops", freeAddr(t), "--cluster-quiet", "200ms", "--cluster-max-delay", "2s")
		waitReady(t, addr, p)
		return p
	}
	p := up()
	c := app.NewClient("http://"+addr, "")
	const total = 500
	var mu sync.Mutex
	accepted := map[string]int64{}
	jobs := make(chan int)
	var wg sync.WaitGroup
	killed := make(chan struct{})
	var killOnce sync.Once
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				d := app.Document{ID: fmt.Sprintf("DOC-%04d", i), DocType: "incident",
					Text: fmt.Sprintf("Document %d: the pager fired for shard %d and the on-call engineer restarted it.", i, i%17)}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				a, err := c.PostDocument(ctx, d)
				cancel()
				if err != nil {
					continue // killed mid-request: not accepted
				}
				mu.Lock()
				accepted[a.ID] = a.Version
				n := len(accepted)
				mu.Unlock()
				if n == 200 {
					killOnce.Do(func() {
						_ = p.cmd.Process.Signal(syscall.SIGKILL)
						close(killed)
					})
				}
			}
		}()
	}
	for i := 0; i < total; i++ {
		select {
		case <-killed:
			i = total
			continue
		case jobs <- i:
		}
	}
	close(jobs)
	wg.Wait()
	<-killed
	_, _ = p.cmd.Process.Wait()
	mu.Lock()
	n := len(accepted)
	mu.Unlock()
	require.GreaterOrEqual(t, n, 200)
	t.Logf("accepted %d documents before SIGKILL", n)

	up()
	eventually(t, 120*time.Second, "every accepted document applied", func() bool {
		st := status(t, c, false)
		return st.Applied >= n && idle(st)
	})
	st := status(t, c, true)
	require.Zero(t, st.OrphanEdges)
	require.Zero(t, st.DeadLetters)
	// Documents the registry recorded but whose publish the kill cut short
	// were never accepted (no 202): they may stay unapplied, never half-applied.
	require.LessOrEqual(t, st.Applied, st.Documents)
	for docID, v := range accepted {
		var e struct {
			Citations []struct {
				DocID   string `json:"doc_id"`
				Version int64  `json:"version"`
			} `json:"citations"`
		}
		require.NoError(t, get(t, c, "/v1/entities/incident/"+docID, &e), docID)
		require.NotEmpty(t, e.Citations, docID)
		for _, ci := range e.Citations {
			require.Equal(t, docID, ci.DocID)
			require.Equal(t, v, ci.Version, "%s applied at its accepted version", docID)
		}
	}
	require.Zero(t, st.Pending["resolver"], "nothing left for the resolver")
}

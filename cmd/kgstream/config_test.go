package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

// TestUpConfigFilePrecedence: the config file sets any flag of up; the
// environment wins over it and the command line over both; unknown keys,
// lists for one-value flags and bad values are refused, naming key and line.
func TestUpConfigFilePrecedence(t *testing.T) {
	t.Setenv("KG_DATA_DIR", "/from/env")
	t.Setenv("KG_STREAM", "")
	cfgFile := filepath.Join(t.TempDir(), "kgstream.yaml")
	writeTree(t, filepath.Dir(cfgFile), map[string]string{filepath.Base(cfgFile): `# the all-in-one
http: 127.0.0.1:9999
data: /from/file
stream: FROMFILE
exclude-path-type: [team, person]
cluster-quiet: 3s
drain-timeout: 45s
demo: true
log-level: warn
`})
	upOf := func() *cobra.Command {
		up, _, err := newRoot(&globals{}).Find([]string{"up"})
		if err != nil {
			t.Fatal(err)
		}
		return up
	}
	cmd := upOf()
	if err := cmd.ParseFlags([]string{"--http", "127.0.0.1:7777"}); err != nil {
		t.Fatal(err)
	}
	if err := applyConfigFile(cmd.Flags(), cfgFile); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"http":              "127.0.0.1:7777", // flag
		"data":              "/from/env",      // environment
		"stream":            "FROMFILE",       // file (its variable is empty)
		"exclude-path-type": "[team,person]",
		"cluster-quiet":     "3s",
		"drain-timeout":     "45s",
		"demo":              "true",
		"cluster-max-delay": "30s",  // default
		"log-level":         "warn", // a global flag, also settable
	} {
		if got := cmd.Flags().Lookup(name).Value.String(); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for text, want := range map[string]string{
		"http: a\nhtpp: b\n":          `line 2: unknown key "htpp"`,
		"server: http://x\n":          `unknown key "server"`,
		"config: other.yaml\n":        `unknown key "config"`,
		"http: [a, b]\n":              "http takes one value, not a list",
		"cluster-quiet: soon\n":       "line 1: cluster-quiet",
		"drain-timeout: later\n":      "line 1: drain-timeout",
		"- http\n":                    "the top level must be a mapping",
		"stream: A\nstream: B\n":      `key "stream" given twice`,
		"exclude-path-type: {a: b}\n": "want a value or a list",
	} {
		writeTree(t, filepath.Dir(cfgFile), map[string]string{filepath.Base(cfgFile): text})
		up := upOf()
		if err := up.ParseFlags(nil); err != nil {
			t.Fatal(err)
		}
		err := applyConfigFile(up.Flags(), cfgFile)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", text, err, want)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestUpDemoWithTokensAndConfig runs `kgstream up --config FILE` whose file
// asks for the demo with a tokens file: the demo goes in as the file's
// writer, and a reader of that tenant sees it.
func TestUpDemoWithTokensAndConfig(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	writeTree(t, dir, map[string]string{
		"tokens.json": `[{"token":"reader-1","tenant":"acme","principal":"alice","groups":["oncall"]},
 {"token":"writer-1","tenant":"acme","principal":"ingest","writer":true}]`,
		"readers.json": `[{"token":"reader-1","tenant":"acme","principal":"alice"}]`,
		"kgstream.yaml": "data: " + filepath.Join(dir, "data") + "\nhttp: " + addr + "\nops: " + freeAddr(t) + "\ntokens: " + filepath.Join(dir, "tokens.json") +
			"\ndemo: true\ncluster-quiet: 50ms\ncluster-max-delay: 1s\nlog-level: warn\n",
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"up", "--config", filepath.Join(dir, "kgstream.yaml")}) }()
	c := app.NewClient("http://"+addr, "reader-1")
	err := c.WaitFor(ctx, 60*time.Second, func() (bool, error) {
		select {
		case err := <-done:
			t.Fatalf("up exited: %v", err)
		default:
		}
		var st struct {
			Tenant    string `json:"tenant"`
			Documents int    `json:"documents"`
			Applied   int    `json:"applied"`
		}
		err := c.Do(ctx, "GET", "/v1/status", "", nil, &st)
		return err == nil && st.Tenant == "acme" && st.Documents == 6 && st.Applied == 6, err
	})
	if err != nil {
		t.Fatalf("the demo as the tokens file's writer: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("up after a stop: %v", err)
	}

	// A tokens file with nobody who may write the demo is one clear error.
	err = run(t.Context(), []string{"up", "--demo", "--data", filepath.Join(dir, "data2"), "--http", freeAddr(t), "--ops", freeAddr(t),
		"--tokens", filepath.Join(dir, "readers.json"), "--log-level", "error"})
	if err == nil || !strings.Contains(err.Error(), "no writer or admin token") {
		t.Fatalf("demo without a writer: %v", err)
	}
	_ = os.RemoveAll(filepath.Join(dir, "data"))
}

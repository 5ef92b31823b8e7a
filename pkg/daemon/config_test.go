package daemon

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseConfigFile: a service's flags from a config file, the
// environment winning over it and the command line over both; unknown keys
// and misshapen values refused with the key and line named.
func TestParseConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`# the gateway
nats: nats://file:4222
redis: redis://file:6379
stream: FILE
log-format: text
tokens: /etc/kgstream/tokens.json
max-body-bytes: 1024
shutdown: 3s
`)
	t.Setenv("KG_REDIS_URL", "redis://env:6379")
	t.Setenv("KG_STREAM", "")
	t.Setenv("KG_TOKENS_FILE", "")
	newFS := func() (*Flags, *flag.FlagSet, *string, *int64, *time.Duration) {
		f := &Flags{Name: "gateway"}
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		f.Register(fs, "127.0.0.1:8081")
		tokens := fs.String("tokens", os.Getenv("KG_TOKENS_FILE"), "tokens file")
		maxBody := fs.Int64("max-body-bytes", 4<<20, "request body limit")
		shutdown := fs.Duration("shutdown", time.Second, "drain time")
		return f, fs, tokens, maxBody, shutdown
	}
	f, fs, tokens, maxBody, shutdown := newFS()
	if err := Parse(fs, []string{"--config", path, "--nats", "nats://flag:4222"}); err != nil {
		t.Fatal(err)
	}
	if f.NATSURL != "nats://flag:4222" || f.RedisURL != "redis://env:6379" || f.Stream != "FILE" || f.LogFormat != "text" ||
		f.HTTPAddr != "127.0.0.1:8081" || *tokens != "/etc/kgstream/tokens.json" || *maxBody != 1024 || *shutdown != 3*time.Second {
		t.Fatalf("flags = %+v tokens=%q maxBody=%d shutdown=%s", *f, *tokens, *maxBody, *shutdown)
	}
	// Without --config nothing is read.
	f, fs, _, _, _ = newFS()
	if err := Parse(fs, nil); err != nil || f.Stream != "KG" {
		t.Fatalf("no config: %v %q", err, f.Stream)
	}
	// KG_CONFIG names the file too.
	t.Setenv("KG_CONFIG", path)
	f, fs, _, _, _ = newFS()
	if err := Parse(fs, nil); err != nil || f.Stream != "FILE" {
		t.Fatalf("KG_CONFIG: %v %q", err, f.Stream)
	}
	t.Setenv("KG_CONFIG", "")
	for text, want := range map[string]string{
		"nats: x\nnast: y\n":     `line 2: unknown key "nast"`,
		"stream: [A, B]\n":       "stream takes one value, not a list",
		"shutdown: later\n":      "line 1: shutdown",
		"stream: A\nstream: B\n": `key "stream" given twice`,
		"[a]\n":                  "must be a mapping",
	} {
		write(text)
		_, fs, _, _, _ := newFS()
		err := Parse(fs, []string{"--config", path})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", text, err, want)
		}
	}
	if got := EnvOf("max-body-bytes"); got != "KG_MAX_BODY_BYTES" {
		t.Fatalf("EnvOf = %q", got)
	}
}

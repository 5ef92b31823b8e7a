package daemon

import (
	"bytes"
	"encoding/json"
	"flag"
	"strings"
	"testing"
)

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	log, err := NewLogger(&b, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec["msg"] != "shown" || rec["level"] != "WARN" {
		t.Fatalf("json logger wrote %q (%v)", b.String(), err)
	}
	b.Reset()
	log, err = NewLogger(&b, "TEXT", "DEBUG")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("detail", "k", "v")
	if got := b.String(); !strings.Contains(got, "level=DEBUG") || !strings.Contains(got, "msg=detail") || !strings.Contains(got, "k=v") {
		t.Fatalf("text logger wrote %q", got)
	}
	for _, bad := range [][2]string{{"xml", "info"}, {"json", "loud"}, {"json", ""}} {
		if _, err := NewLogger(&b, bad[0], bad[1]); err == nil {
			t.Fatalf("NewLogger(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestFlagsRegisterLogFlags(t *testing.T) {
	t.Setenv("KG_LOG_FORMAT", "text")
	var f Flags
	fs := flag.NewFlagSet("svc", flag.ContinueOnError)
	f.Register(fs, "127.0.0.1:0")
	if err := fs.Parse([]string{"--log-level", "debug"}); err != nil {
		t.Fatal(err)
	}
	if f.LogFormat != "text" || f.LogLevel != "debug" {
		t.Fatalf("log flags = %q %q", f.LogFormat, f.LogLevel)
	}
	if _, err := f.Logger(); err != nil {
		t.Fatal(err)
	}
	f.LogFormat = "yaml"
	if _, err := f.Logger(); err == nil {
		t.Fatal("a bad --log-format was accepted")
	}
}

package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Log formats accepted by NewLogger.
const (
	LogFormatJSON = "json"
	LogFormatText = "text"
)

// NewLogger is the one logger set-up of every kgstream binary: format is
// "json" or "text", level one of debug, info, warn, error (case-insensitive,
// as slog spells them). Anything else is an error naming the accepted values.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.TrimSpace(level))); err != nil || strings.TrimSpace(level) == "" {
		return nil, fmt.Errorf("parsing log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(strings.TrimSpace(format)) {
	case LogFormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case LogFormatText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("parsing log format %q: want json or text", format)
	}
}

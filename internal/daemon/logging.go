package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"os"
)

// Log formats.
const (
	LogText = "text"
	LogJSON = "json"
)

// Log levels.
const (
	LogDebug = "debug"
	LogInfo  = "info"
	LogWarn  = "warn"
	LogError = "error"
)

// ParseLogLevel parses debug, info, warn or error ("" is info).
func ParseLogLevel(level string) (slog.Level, error) {
	switch level {
	case LogDebug:
		return slog.LevelDebug, nil
	case "", LogInfo:
		return slog.LevelInfo, nil
	case LogWarn:
		return slog.LevelWarn, nil
	case LogError:
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q: use debug, info, warn or error", level)
}

// newLogger returns the daemon's structured logger on w (stderr when
// nil): text for a person at a terminal, or one JSON object per line.
// Nothing the daemon logs holds a token, a secret or a secret reference:
// the parts log ids, codes and safe messages only.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	lv, err := ParseLogLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "", LogText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case LogJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("unknown log format %q: use text or json", format)
}

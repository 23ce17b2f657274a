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

// newLogger returns the daemon's structured logger on w (stderr when
// nil): text for a person at a terminal, or one JSON object per line.
// Nothing the daemon logs holds a token, a secret or a secret reference:
// the parts log ids, codes and safe messages only.
func newLogger(w io.Writer, format string) (*slog.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	switch format {
	case "", LogText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case LogJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("unknown log format %q: use text or json", format)
}

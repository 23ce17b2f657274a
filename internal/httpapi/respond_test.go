package httpapi

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWriterError: an error's own headers go out with the envelope (a
// refused range's Content-Range), the envelope's headers win over them, and
// an unmapped error is a logged 500 whose text is never sent.
func TestWriterError(t *testing.T) {
	var logged bytes.Buffer
	wr := Writer{Log: slog.New(slog.NewTextHandler(&logged, nil)), Failed: "test request failed",
		Caller: func(*http.Request) string { return "operator:local" }}
	r := httptest.NewRequest(http.MethodGet, "/v1/artifacts/a/content", nil)

	w := httptest.NewRecorder()
	w.Header().Set("ETag", `"x"`)
	e := Errorf(CodeRangeNotSatisfiable, "the range starts past the end")
	e.Header = http.Header{"Content-Range": {"bytes */10"}, "Content-Type": {"text/plain"}}
	wr.Error(w, r, e)
	if w.Code != http.StatusRequestedRangeNotSatisfiable || w.Header().Get("Content-Range") != "bytes */10" ||
		w.Header().Get("Content-Type") != "application/json" || w.Header().Get("ETag") != "" || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("refused range: %d %v", w.Code, w.Header())
	}
	if want := `{"error":{"code":"range_not_satisfiable","message":"the range starts past the end"}}` + "\n"; w.Body.String() != want {
		t.Fatalf("body %q, want %q", w.Body.String(), want)
	}

	w = httptest.NewRecorder()
	wr.Error(w, r, errors.New("sqlite: disk I/O error password=hunter2"))
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "hunter2") {
		t.Fatalf("unmapped error: %d %s", w.Code, w.Body.String())
	}
	if !strings.Contains(logged.String(), "test request failed") || !strings.Contains(logged.String(), "operator:local") {
		t.Fatalf("the 500 was not logged with its caller: %s", logged.String())
	}
}

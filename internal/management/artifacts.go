package management

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The artifact routes: list, get (with an ETag) and content, streamed
// through storage.Artifacts with one byte range.

// artifactFilters are the filters of GET /v1/artifacts.
type artifactFilters struct {
	Execution string `json:"execution"`
	Work      string `json:"work"`
}

func (rs *Resources) listArtifacts(r *http.Request) (any, error) {
	q, limit, cursor, err := listQuery(r, "execution", "work")
	if err != nil {
		return nil, err
	}
	f := artifactFilters{Execution: q.Get("execution"), Work: q.Get("work")}
	ctx := r.Context()
	page, err := pageByCreated(rs.cursors, r, f, limit, cursor, func(p storage.Page) ([]storage.Artifact, error) {
		return rs.store.ListArtifacts(ctx, &storage.ListArtifactsParams{Execution: f.Execution, Work: f.Work, Page: p})
	}, func(a storage.Artifact) storage.Position { return storage.Position{CreatedAt: a.CreatedAt, ID: a.ID} })
	return listOut(page, err, artifactOut)
}

// artifactETag is the entity tag of an artifact; its bytes never change.
func artifactETag(a storage.Artifact) string { return "artifact/" + a.ID + "/" + a.SHA256 }

func (rs *Resources) getArtifact(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	a, err := rs.store.GetArtifact(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "artifact", id)
	}
	return httpapi.Tagged(artifactETag(a), artifactOut(a)), nil
}

// byteRange is one satisfiable range of a body: [Start, End], inclusive.
type byteRange struct{ Start, End int64 }

// parseRange reads a Range header against a body of size bytes, as RFC
// 9110 section 14 says. It supports exactly one range of the bytes unit
// (the unit's name is case-insensitive): a-b, a- and -n, positions of any
// number of digits (a last position or a suffix beyond the body means up
// to its end). ok is false when the header is absent or names another unit
// (the whole body is sent). A second range, a malformed range or one that
// starts past the end is range_not_satisfiable.
func parseRange(header string, size int64) (br byteRange, ok bool, err error) {
	if header == "" {
		return byteRange{}, false, nil
	}
	unit, spec, found := strings.Cut(header, "=")
	if !found || !strings.EqualFold(strings.TrimSpace(unit), "bytes") {
		return byteRange{}, false, nil
	}
	unsatisfiable := func(why string) error {
		return httpapi.Errorf(httpapi.CodeRangeNotSatisfiable, "%s; the artifact has %d bytes (send one range: bytes=a-b, bytes=a- or bytes=-n)", why, size)
	}
	spec = strings.TrimSpace(spec)
	if strings.Contains(spec, ",") {
		return byteRange{}, false, unsatisfiable("only one byte range is supported")
	}
	first, last, found := strings.Cut(spec, "-")
	if !found {
		return byteRange{}, false, unsatisfiable("the range is malformed")
	}
	// num reads a position: one or more digits, saturated at MaxInt64
	// (no body is that large, so a position past it is past the end).
	num := func(s string) (int64, bool) {
		if s == "" {
			return 0, false
		}
		for _, c := range s {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
		s = strings.TrimLeft(s, "0")
		if s == "" {
			return 0, true
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return math.MaxInt64, true
		}
		return n, true
	}
	switch {
	case first == "":
		n, isNum := num(last)
		if !isNum {
			return byteRange{}, false, unsatisfiable("the range is malformed")
		}
		if n == 0 || size == 0 {
			return byteRange{}, false, unsatisfiable("the range selects no bytes")
		}
		return byteRange{Start: max(0, size-n), End: size - 1}, true, nil
	default:
		a, isNum := num(first)
		if !isNum {
			return byteRange{}, false, unsatisfiable("the range is malformed")
		}
		end := size - 1
		if last != "" {
			b, isNum := num(last)
			if !isNum || b < a {
				return byteRange{}, false, unsatisfiable("the range is malformed")
			}
			end = min(b, size-1)
		}
		if a >= size {
			return byteRange{}, false, unsatisfiable(fmt.Sprintf("the range starts at byte %d, past the end", a))
		}
		return byteRange{Start: a, End: end}, true, nil
	}
}

// artifactContent serves GET /v1/artifacts/{id}/content: the bytes, with
// Accept-Ranges: bytes. One range (Range: bytes=a-b, a- or -n) is answered
// 206 with Content-Range; several ranges, or one past the end, is 416
// range_not_satisfiable with Content-Range: bytes */size. If-None-Match
// with the artifact's ETag is 304; an If-Range that does not match sends
// the whole body.
func (rs *Resources) artifactContent(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	a, f, err := rs.artifacts.Open(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "artifact", id)
	}
	etag := httpapi.ETag(artifactETag(a))
	if httpapi.IfNoneMatch(r, etag) {
		f.Close()
		return &httpapi.Response{Status: http.StatusNotModified, ETag: etag}, nil
	}
	rangeHeader := r.Header.Get("Range")
	if ir := r.Header.Get("If-Range"); ir != "" && ir != etag {
		rangeHeader = ""
	}
	if len(r.Header.Values("Range")) > 1 {
		f.Close()
		return rangeRefusal(httpapi.Errorf(httpapi.CodeRangeNotSatisfiable, "only one Range header and one byte range are supported"), a.Size)
	}
	br, partial, err := parseRange(rangeHeader, a.Size)
	if err != nil {
		f.Close()
		return rangeRefusal(err, a.Size)
	}
	return &artifactStream{meta: a, file: f, etag: etag, br: br, partial: partial}, nil
}

// rangeRefusal is a 416 range_not_satisfiable carrying Content-Range:
// bytes */size, as RFC 9110 asks.
func rangeRefusal(err error, size int64) (any, error) {
	if pe, ok := err.(*httpapi.Error); ok {
		pe.Header = http.Header{"Content-Range": {fmt.Sprintf("bytes */%d", size)}}
	}
	return nil, err
}

// artifactStream writes an artifact's bytes and closes its file.
type artifactStream struct {
	meta    storage.Artifact
	file    storage.Blob
	etag    string
	br      byteRange
	partial bool
}

func (s *artifactStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer s.file.Close()
	h := w.Header()
	mt := s.meta.MediaType
	if mt == "" {
		mt = "application/octet-stream"
	}
	h.Set("Content-Type", mt)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Accept-Ranges", "bytes")
	h.Set("ETag", s.etag)
	start, n := int64(0), s.meta.Size
	status := http.StatusOK
	if s.partial {
		start, n = s.br.Start, s.br.End-s.br.Start+1
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", s.br.Start, s.br.End, s.meta.Size))
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(status)
	_, _ = io.Copy(w, io.NewSectionReader(s.file, start, n))
}

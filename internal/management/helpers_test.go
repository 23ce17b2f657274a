package management_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// raw is one HTTP exchange over the harness socket, sent exactly as
// given, so that tests can send what the client never would.
type raw struct {
	status int
	header http.Header
	body   []byte
}

func (r raw) code() string {
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &env)
	return env.Error.Code
}

func (r raw) message() string {
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &env)
	return env.Error.Message
}

// rawClient speaks HTTP/1.1 over the socket with no help at all.
func rawClient(sock string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type req struct {
	method, path, token, body string
	header                    map[string]string
	noContentType             bool
}

func do(t *testing.T, h *mgmttest.Harness, q req) raw {
	t.Helper()
	var rd io.Reader
	if q.body != "" {
		rd = strings.NewReader(q.body)
	}
	r, err := http.NewRequest(q.method, "http://localhost"+q.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if q.token != "" {
		r.Header.Set("Authorization", "Bearer "+q.token)
	}
	if q.method == http.MethodPost && !q.noContentType {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	resp, err := rawClient(h.Socket).Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return raw{status: resp.StatusCode, header: resp.Header, body: b}
}

func expect(t *testing.T, got raw, status int, code string) {
	t.Helper()
	if got.status != status || got.code() != code {
		t.Fatalf("got %d %q (%s), want %d %q", got.status, got.code(), bytes.TrimSpace(got.body), status, code)
	}
}

// thing is a record of the test routes below.
type thing struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Seq  int    `json:"seq"`
	Rev  int    `json:"rev"`
}

// fixture serves resource routes like the daemon's (create, get with an
// ETag, list with cursors) over an in-memory table, so that the server's
// machinery is tested through real routes.
type fixture struct {
	h *mgmttest.Harness

	mu      sync.Mutex
	things  []thing
	creates int
	fails   int
}

func (f *fixture) routes() []management.Route {
	return []management.Route{
		{Method: "POST", Pattern: "/v1/test/things", Role: management.RoleOperate, Idempotent: true, Handler: f.create},
		{Method: "GET", Pattern: "/v1/test/things", Role: management.RoleView, Handler: f.list},
		{Method: "GET", Pattern: "/v1/test/things/{id}", Role: management.RoleView, Handler: f.get},
		{Method: "POST", Pattern: "/v1/test/echo", Role: management.RoleOperate, Handler: f.echo},
		{Method: "POST", Pattern: "/v1/test/flaky", Role: management.RoleOperate, Idempotent: true, Handler: f.flaky},
		{Method: "GET", Pattern: "/v1/test/broken", Role: management.RoleView, Handler: f.broken},
		{Method: "GET", Pattern: "/v1/test/panic", Role: management.RoleView, Handler: func(*http.Request) (any, error) { panic("bad handler") }},
	}
}

type createReq struct {
	Name string `json:"name"`
}

type created struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

func (f *fixture) create(r *http.Request) (any, error) {
	var in createReq
	if err := httpapi.DecodeBody(r, &in); err != nil {
		return nil, err
	}
	key, ok := management.IdempotencyKey(r.Context())
	if !ok {
		return nil, errors.New("no idempotency key on the context")
	}
	// A durable identity derived from the effective key, as operator
	// actions derive theirs.
	id := ids.Derive("thg", mgmttest.Epoch, key)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	f.things = append(f.things, thing{ID: id, Name: in.Name, Seq: len(f.things) + 1, Rev: 1})
	return &httpapi.Response{Status: http.StatusCreated, Body: created{ID: id, Key: key}}, nil
}

func (f *fixture) add(id, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.things = append(f.things, thing{ID: id, Name: name, Seq: len(f.things) + 1, Rev: 1})
}

func (f *fixture) touch(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.things {
		if f.things[i].ID == id {
			f.things[i].Rev++
		}
	}
}

func (f *fixture) get(r *http.Request) (any, error) {
	id := r.PathValue("id")
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, th := range f.things {
		if th.ID == id {
			return httpapi.Tagged(strconv.Itoa(th.Rev), th), nil
		}
	}
	return nil, httpapi.Wrap(httpapi.CodeNotFound, extension.ErrNotFound, fmt.Sprintf("no thing %q", id))
}

type listFilters struct {
	Name string `json:"name"`
}

func (f *fixture) list(r *http.Request) (any, error) {
	q, err := httpapi.Query(r, "name", "limit", "cursor")
	if err != nil {
		return nil, err
	}
	limit, cursor, err := management.PageParams(q)
	if err != nil {
		return nil, err
	}
	filters := listFilters{Name: q.Get("name")}
	f.mu.Lock()
	defer f.mu.Unlock()
	ks := management.Keyset[int]{Bound: len(f.things), After: 0}
	if cursor != "" {
		if ks, err = management.DecodeCursor[int](f.h.Server.Cursors(), r, filters, cursor); err != nil {
			return nil, err
		}
	}
	page := api.Page[thing]{Items: []thing{}}
	for _, th := range f.things {
		if th.Seq <= ks.After || th.Seq > ks.Bound || (filters.Name != "" && th.Name != filters.Name) {
			continue
		}
		if len(page.Items) == limit {
			next := management.Keyset[int]{Bound: ks.Bound, After: page.Items[len(page.Items)-1].Seq}
			if page.NextCursor, err = management.EncodeCursor(f.h.Server.Cursors(), r, filters, next); err != nil {
				return nil, err
			}
			break
		}
		page.Items = append(page.Items, th)
	}
	return page, nil
}

type echoReq struct {
	Name   string   `json:"name"`
	N      int      `json:"n"`
	Tags   []string `json:"tags"`
	Nested struct {
		A string `json:"a"`
	} `json:"nested"`
}

func (f *fixture) echo(r *http.Request) (any, error) {
	var in echoReq
	if err := httpapi.DecodeBody(r, &in); err != nil {
		return nil, err
	}
	return in, nil
}

// flaky fails its first call with a refusal and succeeds after.
func (f *fixture) flaky(r *http.Request) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fails++
	if f.fails == 1 {
		return nil, httpapi.Wrap(httpapi.CodeConflict, extension.ErrConflict, "not yet")
	}
	return map[string]int{"attempt": f.fails}, nil
}

// broken fails as a backend would, with text that must never reach the
// caller.
func (f *fixture) broken(*http.Request) (any, error) {
	return nil, errors.New("sqlite: disk I/O error at /var/secret/path password=hunter2")
}

// start runs a harness with the fixture's routes.
func start(t *testing.T, opts mgmttest.Options) (*mgmttest.Harness, *fixture) {
	t.Helper()
	f := &fixture{}
	opts.Routes = append(opts.Routes, f.routes()...)
	h := mgmttest.Start(t, opts)
	f.h = h
	return h, f
}

// routePath turns a pattern into a concrete path.
func routePath(pattern string) string {
	parts := strings.Split(pattern, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") {
			parts[i] = "x"
		}
	}
	return strings.Join(parts, "/")
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

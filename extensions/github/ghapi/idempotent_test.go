package ghapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/github/ghtest"
)

// stateful is the ghtest fake GitHub (which keeps what it is asked to
// create) with the operations built on its App.
type stateful struct {
	t    *testing.T
	fake *ghtest.Server
	ops  map[string]extension.Operation
}

const fakeRepo = "octo/hello"

func newStateful(t *testing.T) *stateful {
	now := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	fake := ghtest.New(t, ghtest.Options{Now: now})
	app, err := NewApp(AppOptions{AppID: fake.AppID(), PrivateKey: fake.KeyPEM, BaseURL: fake.APIURL(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := Operations(Options{Credentials: app, BaseURL: fake.APIURL(), Now: now,
		Allow: func(_ extension.Authority, repo string) bool { return repo == fakeRepo }})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]extension.Operation{}
	for _, op := range ops {
		m[op.Name] = op
	}
	return &stateful{t: t, fake: fake, ops: m}
}

// run calls op as execution exe with request ID req.
func (s *stateful) run(op, exe, req, input string) (map[string]any, error) {
	s.t.Helper()
	a := extension.Authority{Scope: "ops", Work: "wrk_1", Execution: exe, Operation: op, RequestID: req}
	out, err := s.ops[op].Handler(context.Background(), a, json.RawMessage(input))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		s.t.Fatalf("%s: %s", op, out)
	}
	return m, nil
}

func (s *stateful) ok(op, exe, req, input string) map[string]any {
	s.t.Helper()
	m, err := s.run(op, exe, req, input)
	if err != nil {
		s.t.Fatalf("%s (%s %s): %v", op, exe, req, err)
	}
	return m
}

// posts counts the fake's requests of method whose path ends in suffix.
func (s *stateful) posts(method, suffix string) int {
	n := 0
	for _, r := range s.fake.Requests() {
		if r.Method == method && strings.HasSuffix(r.Path, suffix) {
			n++
		}
	}
	return n
}

func TestCommentIsIdempotentOnRequestID(t *testing.T) {
	s := newStateful(t)
	in := `{"repo":"octo/hello","number":7,"body":"On it.\n"}`
	first := s.ok(OpIssueComment, "exe_1", "req-1", in)
	// Run again with the same request ID, as the host does after a crash
	// before the result was committed: the comment is found, not posted.
	again := s.ok(OpIssueComment, "exe_1", "req-1", in)
	if again["id"] != first["id"] || again["url"] != first["url"] || again["replayed"] != true || first["replayed"] != nil {
		t.Fatalf("again %v, first %v", again, first)
	}
	cs := s.fake.Comments(fakeRepo, 7)
	if len(cs) != 1 || s.fake.Created() != 1 || s.posts("POST", "/issues/7/comments") != 1 {
		t.Fatalf("comments %+v, created %d", cs, s.fake.Created())
	}
	if want := "On it.\n\n<!-- open-conduit:request=exe_1/req-1 -->"; cs[0].Body != want {
		t.Fatalf("body %q, want %q", cs[0].Body, want)
	}
	// Another request ID, or the same one from another execution (a new
	// request to the host), posts again; no request ID posts the body as
	// it is.
	if m := s.ok(OpIssueComment, "exe_1", "req-2", in); m["id"] == first["id"] || m["replayed"] != nil {
		t.Fatalf("another request: %v", m)
	}
	s.ok(OpIssueComment, "exe_2", "req-1", in)
	s.ok(OpIssueComment, "exe_1", "", `{"repo":"octo/hello","number":7,"body":"plain"}`)
	cs = s.fake.Comments(fakeRepo, 7)
	if len(cs) != 4 || s.fake.Created() != 4 || !strings.HasSuffix(cs[2].Body, "request=exe_2/req-1 -->") || cs[3].Body != "plain" {
		t.Fatalf("comments %+v", cs)
	}
}

func TestCommentSearchIsBounded(t *testing.T) {
	s := newStateful(t)
	in := `{"repo":"octo/hello","number":3,"body":"Done."}`
	for i := range 150 {
		s.fake.AddComment(fakeRepo, 3, "mona", fmt.Sprintf("comment %d", i))
	}
	s.ok(OpIssueComment, "exe_1", "near", in)
	for i := range 250 {
		s.fake.AddComment(fakeRepo, 3, "mona", fmt.Sprintf("later %d", i))
	}
	// 251st most recent, on page 2 of 5: within the bound.
	before := s.posts("GET", "/issues/3/comments")
	if m := s.ok(OpIssueComment, "exe_1", "near", in); m["replayed"] != true || s.fake.Created() != 1 {
		t.Fatalf("within the bound: %v, created %d", m, s.fake.Created())
	}
	if got := s.posts("GET", "/issues/3/comments") - before; got != 5 {
		t.Fatalf("%d list requests, want page 1, then 5, 4, 3, 2", got)
	}
	// The first page is read too.
	s.ok(OpIssueComment, "exe_1", "first", `{"repo":"octo/hello","number":4,"body":"First."}`)
	for i := range 1000 {
		s.fake.AddComment(fakeRepo, 4, "mona", fmt.Sprintf("c %d", i))
	}
	if m := s.ok(OpIssueComment, "exe_1", "first", `{"repo":"octo/hello","number":4,"body":"First."}`); m["replayed"] != true {
		t.Fatalf("on the first page: %v", m)
	}
	// Beyond the 300 most recent and past the first page: posted again,
	// as documented.
	for i := range 400 {
		s.fake.AddComment(fakeRepo, 3, "mona", fmt.Sprintf("much later %d", i))
	}
	if m := s.ok(OpIssueComment, "exe_1", "near", in); m["replayed"] != nil || s.fake.Created() != 3 {
		t.Fatalf("beyond the bound: %v, created %d", m, s.fake.Created())
	}
}

func TestPullRequestIsIdempotentOnRequestID(t *testing.T) {
	s := newStateful(t)
	in := `{"repo":"octo/hello","title":"Fix","head":"fix-1","base":"main","body":"Fixes #7"}`
	first := s.ok(OpPRCreate, "exe_1", "pr-1", in)
	again := s.ok(OpPRCreate, "exe_1", "pr-1", in)
	if again["number"] != first["number"] || again["url"] != first["url"] || again["head"] != "fix-1" || again["base"] != "main" || again["replayed"] != true {
		t.Fatalf("again %v, first %v", again, first)
	}
	ps := s.fake.Pulls(fakeRepo)
	if len(ps) != 1 || s.fake.Created() != 1 || ps[0].Body != "Fixes #7\n\n<!-- open-conduit:request=exe_1/pr-1 -->" {
		t.Fatalf("pulls %+v", ps)
	}
	// Found among closed ones too (merged by the time the run repeats).
	s.ok(OpPRMerge, "exe_1", "", `{"repo":"octo/hello","number":1}`)
	if m := s.ok(OpPRCreate, "exe_1", "pr-1", in); m["number"] != first["number"] || m["replayed"] != true {
		t.Fatalf("after the merge: %v", m)
	}
	// Another request ID opens another one; a pull request without a body
	// gets the mark alone.
	m := s.ok(OpPRCreate, "exe_1", "pr-2", `{"repo":"octo/hello","title":"More","head":"octo:fix-2","base":"main"}`)
	if m["replayed"] != nil || m["number"] == first["number"] {
		t.Fatalf("another request: %v", m)
	}
	if ps = s.fake.Pulls(fakeRepo); len(ps) != 2 || ps[1].Body != "<!-- open-conduit:request=exe_1/pr-2 -->" {
		t.Fatalf("pulls %+v", ps)
	}
	if again := s.ok(OpPRCreate, "exe_1", "pr-2", `{"repo":"octo/hello","title":"More","head":"octo:fix-2","base":"main"}`); again["number"] != m["number"] {
		t.Fatalf("owner:branch head: %v", again)
	}
	// Another execution's request from the same head is a new request:
	// GitHub refuses a second open pull request for it.
	s.ok(OpPRCreate, "exe_2", "pr-3", `{"repo":"octo/hello","title":"Again","head":"fix-3","base":"main"}`)
	if _, err := s.run(OpPRCreate, "exe_3", "pr-3", `{"repo":"octo/hello","title":"Again","head":"fix-3","base":"main"}`); codeOf(err) != CodeValidationFailed {
		t.Fatalf("a second open pull request: %v", err)
	}
	if s.fake.Created() != 4 { // three pull requests and a merge
		t.Fatalf("created %d", s.fake.Created())
	}
}

func TestReviewIsIdempotentOnRequestID(t *testing.T) {
	s := newStateful(t)
	s.ok(OpPRCreate, "exe_1", "", `{"repo":"octo/hello","title":"Fix","head":"fix","base":"main"}`)
	in := `{"repo":"octo/hello","number":1,"event":"request_changes","body":"Add a test."}`
	first := s.ok(OpReview, "exe_1", "rv-1", in)
	again := s.ok(OpReview, "exe_1", "rv-1", in)
	if again["id"] != first["id"] || again["state"] != "CHANGES_REQUESTED" || again["url"] != first["url"] || again["replayed"] != true {
		t.Fatalf("again %v, first %v", again, first)
	}
	// An approval without a body carries the mark alone.
	approve := `{"repo":"octo/hello","number":1,"event":"approve"}`
	a1 := s.ok(OpReview, "exe_1", "rv-2", approve)
	a2 := s.ok(OpReview, "exe_1", "rv-2", approve)
	if a1["id"] == first["id"] || a2["id"] != a1["id"] || a2["state"] != "APPROVED" {
		t.Fatalf("approvals %v %v", a1, a2)
	}
	rs := s.fake.Reviews(fakeRepo, 1)
	if len(rs) != 2 || s.fake.Created() != 3 || s.posts("POST", "/pulls/1/reviews") != 2 ||
		rs[0].Body != "Add a test.\n\n<!-- open-conduit:request=exe_1/rv-1 -->" || rs[1].Body != "<!-- open-conduit:request=exe_1/rv-2 -->" {
		t.Fatalf("reviews %+v, created %d", rs, s.fake.Created())
	}
}

func TestMergeRunAgainAnswersTheMerge(t *testing.T) {
	s := newStateful(t)
	s.ok(OpPRCreate, "exe_1", "", `{"repo":"octo/hello","title":"Fix","head":"fix","base":"main"}`)
	head := s.fake.Pulls(fakeRepo)[0].HeadSHA
	in := `{"repo":"octo/hello","number":1,"method":"squash","sha":"` + head + `"}`
	first := s.ok(OpPRMerge, "exe_1", "m-1", in)
	again := s.ok(OpPRMerge, "exe_1", "m-1", in)
	if first["merged"] != true || again["merged"] != true || again["sha"] != first["sha"] || again["replayed"] != true {
		t.Fatalf("again %v, first %v", again, first)
	}
	if s.fake.Created() != 2 || s.posts("PUT", "/pulls/1/merge") != 2 {
		t.Fatalf("created %d", s.fake.Created())
	}
	// Without a request ID, or naming another head, a merged pull request
	// is not mergeable, as before.
	if _, err := s.run(OpPRMerge, "exe_1", "", in); codeOf(err) != CodeNotMergeable {
		t.Fatalf("no request ID: %v", err)
	}
	if _, err := s.run(OpPRMerge, "exe_1", "m-2", `{"repo":"octo/hello","number":1,"sha":"0000"}`); codeOf(err) != CodeNotMergeable {
		t.Fatalf("another head: %v", err)
	}
}

func TestRequestMarkerCannotBreakOut(t *testing.T) {
	for _, id := range []string{"-->", "--!><script>x</script>", "a b\nc", "<!--", "%41", "A", "é", "x/y", "mcp_0123abcd", "req-1_2.3~"} {
		m, err := requestMarker(OpIssueComment, extension.Authority{Execution: "exe_1", RequestID: id})
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		inner := strings.TrimSuffix(strings.TrimPrefix(m, markerPrefix), " -->")
		if !strings.HasPrefix(m, markerPrefix) || !strings.HasSuffix(m, " -->") || strings.ContainsAny(inner, "<>! \r\n\t") ||
			strings.Count(m, "-->") != 1 || strings.Count(m, "<!--") != 1 || strings.Count(inner, "/") != 1 {
			t.Errorf("%q: marker %q", id, m)
		}
	}
	if a, _ := requestMarker("op", extension.Authority{Execution: "e", RequestID: "%41"}); a == markerPrefix+"e/A -->" {
		t.Fatal("two request IDs share a marker")
	}
	if m, _ := requestMarker("op", extension.Authority{Execution: "exe_1", RequestID: "req-1_2.3~"}); m != "<!-- open-conduit:request=exe_1/req-1_2.3~ -->" {
		t.Fatalf("a plain request ID is escaped: %q", m)
	}
	// Too long: refused before anything reaches GitHub.
	s := newStateful(t)
	_, err := s.run(OpIssueComment, "exe_1", strings.Repeat("r", MaxMarkedRequestID+1), `{"repo":"octo/hello","number":1,"body":"x"}`)
	if codeOf(err) != CodeInvalidInput || len(s.fake.Requests()) != 0 {
		t.Fatalf("a long request ID: %v, %d requests", err, len(s.fake.Requests()))
	}
}

// A mark is trusted only on what the credential's own account wrote:
// someone else's comment or pull request carrying the very mark an
// operation would look for is passed over, and the operation creates its
// own. The App's account is learned once, from GET /app with its JWT.
func TestMarkOfAnotherAuthorIsNotTrusted(t *testing.T) {
	s := newStateful(t)
	mark := "<!-- open-conduit:request=exe_1/req-1 -->"
	s.fake.AddComment(fakeRepo, 7, "mallory", "Looks done to me.\n\n"+mark)
	in := `{"repo":"octo/hello","number":7,"body":"On it."}`
	first := s.ok(OpIssueComment, "exe_1", "req-1", in)
	if first["replayed"] != nil || s.fake.Created() != 1 {
		t.Fatalf("someone else's marked comment was taken for ours: %v, created %d", first, s.fake.Created())
	}
	// Ours is found again on a replay, among both marked comments.
	if again := s.ok(OpIssueComment, "exe_1", "req-1", in); again["replayed"] != true || again["id"] != first["id"] {
		t.Fatalf("replay: %v, first %v", again, first)
	}
	cs := s.fake.Comments(fakeRepo, 7)
	if len(cs) != 2 || cs[1].Author != ghtest.BotLogin {
		t.Fatalf("comments %+v", cs)
	}

	s.fake.AddPull(fakeRepo, "mallory", "octo:fix-9", "main", "closed", "Fix", "<!-- open-conduit:request=exe_1/pr-9 -->")
	pr := s.ok(OpPRCreate, "exe_1", "pr-9", `{"repo":"octo/hello","title":"Fix","head":"fix-9","base":"main"}`)
	if pr["replayed"] != nil || len(s.fake.Pulls(fakeRepo)) != 2 {
		t.Fatalf("someone else's marked pull request was taken for ours: %v", pr)
	}

	apps := 0
	for _, r := range s.fake.Requests() {
		if r.Method == "GET" && r.Path == "/api/v3/app" {
			apps++
			if r.Auth != "jwt" || r.Status != 200 {
				t.Fatalf("GET /app: %+v", r)
			}
		}
	}
	if apps != 1 {
		t.Fatalf("GET /app asked %d times, want once for the service's life", apps)
	}
}

// A plain token's account is learned from GET /user; while it cannot be
// learned (GET /user refused, as GitHub refuses an installation token), no
// mark is trusted and the operation creates anew.
func TestMarkWithAPlainToken(t *testing.T) {
	e := newEnv(t)
	e.fake.static = "ghp_CANARYstatic"
	ops := e.build(StaticToken("ghp_CANARYstatic"))
	mark := "<!-- open-conduit:request=exe_1/req-1 -->"
	e.fake.route("GET /repos/octo/hello/issues/3/comments", func(seen) reply {
		return reply{status: 200, body: []map[string]any{
			{"id": 1, "body": "x\n\n" + mark, "user": map[string]any{"login": "mallory"}},
			{"id": 2, "body": "y\n\n" + mark, "user": map[string]any{"login": "Octocat"}},
		}}
	})
	var posts atomic.Int32
	e.fake.route("POST /repos/octo/hello/issues/3/comments", func(seen) reply { posts.Add(1); return reply{status: 201, body: map[string]any{"id": 3}} })
	var user atomic.Value
	user.Store(reply{status: 403, body: map[string]string{"message": "Resource not accessible by integration"}})
	e.fake.route("GET /user", func(seen) reply { return user.Load().(reply) })
	a := auth
	a.Execution, a.RequestID = "exe_1", "req-1"
	call := func() map[string]any {
		t.Helper()
		out, err := ops[OpIssueComment].Handler(context.Background(), a, json.RawMessage(`{"repo":"octo/hello","number":3,"body":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := call(); m["replayed"] != nil || m["id"] != float64(3) || posts.Load() != 1 {
		t.Fatalf("account unknown: %v, posts %d", m, posts.Load())
	}
	user.Store(reply{status: 200, body: map[string]any{"login": "octocat"}})
	if m := call(); m["replayed"] != true || m["id"] != float64(2) || posts.Load() != 1 {
		t.Fatalf("account octocat: %v, posts %d", m, posts.Load())
	}
	if m := call(); m["id"] != float64(2) {
		t.Fatalf("again: %v", m)
	}
	users := 0
	for _, r := range e.fake.seen() {
		if r.Path == "/user" {
			users++
		}
	}
	if users != 2 {
		t.Fatalf("GET /user asked %d times: once refused, then once learned and kept", users)
	}
}

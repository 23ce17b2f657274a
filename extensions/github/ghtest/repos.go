package ghtest

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// AppSlug is the fake App's slug (GET /app), and BotLogin the account its
// installation tokens act as: the author of everything the fake's API
// creates.
const (
	AppSlug  = "ghtest-app"
	BotLogin = AppSlug + "[bot]"
)

// Comment is an issue comment the fake holds.
type Comment struct {
	ID     int64
	Number int
	Author string
	// Body is kept verbatim, as GitHub keeps it (an HTML comment in it
	// included), and answered so.
	Body string
	URL  string
}

// Pull is a pull request the fake holds.
type Pull struct {
	Number int
	Author string
	Title  string
	Body   string
	// Head is its head as GitHub labels it, owner:branch; HeadRef the
	// branch alone.
	Head, HeadRef, HeadSHA string
	Base                   string
	Draft                  bool
	State                  string // open or closed
	Merged                 bool
	MergeSHA               string
}

// Review is a pull request review the fake holds.
type Review struct {
	ID       int64
	Number   int
	Author   string
	State    string // APPROVED, CHANGES_REQUESTED or COMMENTED
	Body     string
	CommitID string
}

type repoState struct {
	comments []Comment
	pulls    []*Pull
	reviews  []Review
	number   int
}

func (s *Server) repo(full string) *repoState {
	key := strings.ToLower(full)
	r := s.repos[key]
	if r == nil {
		r = &repoState{}
		s.repos[key] = r
	}
	return r
}

// AddComment adds a comment by author to issue number of repo, as a
// person writing on GitHub would; it is not counted as a creation.
func (s *Server) AddComment(repo string, number int, author, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addComment(repo, number, author, body)
}

func (s *Server) addComment(repo string, number int, author, body string) Comment {
	s.n++
	owner, name, _ := strings.Cut(repo, "/")
	c := Comment{ID: int64(s.n), Number: number, Author: author, Body: body,
		URL: fmt.Sprintf("%s/%s/%s/issues/%d#issuecomment-%d", s.URL, owner, name, number, s.n)}
	r := s.repo(repo)
	r.comments = append(r.comments, c)
	return c
}

// AddPull adds a pull request by author from head (owner:branch) into
// base, in state (open or closed), as a person opening one on GitHub
// would; it is not counted as a creation.
func (s *Server) AddPull(repo, author, head, base, state, title, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.repo(repo)
	st.number++
	sum := sha1.Sum([]byte(repo + " " + head + " " + strconv.Itoa(st.number)))
	_, ref, _ := strings.Cut(head, ":")
	st.pulls = append(st.pulls, &Pull{Number: st.number, Author: author, Title: title, Body: body, Head: head, HeadRef: ref,
		HeadSHA: hex.EncodeToString(sum[:]), Base: base, State: state})
}

// Comments are issue number's comments, oldest first.
func (s *Server) Comments(repo string, number int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.repo(repo).comments {
		if c.Number == number {
			out = append(out, c)
		}
	}
	return out
}

// Pulls are repo's pull requests, oldest first.
func (s *Server) Pulls(repo string) []Pull {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Pull
	for _, p := range s.repo(repo).pulls {
		out = append(out, *p)
	}
	return out
}

// Reviews are pull request number's reviews, oldest first.
func (s *Server) Reviews(repo string, number int) []Review {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Review
	for _, r := range s.repo(repo).reviews {
		if r.Number == number {
			out = append(out, r)
		}
	}
	return out
}

// Created counts what the API created on request: comments, pull
// requests, reviews and merges.
func (s *Server) Created() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.created
}

var (
	issueCommentsRoute = regexp.MustCompile(`^/issues/([0-9]+)/comments$`)
	pullRoute          = regexp.MustCompile(`^/pulls/([0-9]+)$`)
	reviewsRoute       = regexp.MustCompile(`^/pulls/([0-9]+)/reviews$`)
	mergeRoute         = regexp.MustCompile(`^/pulls/([0-9]+)/merge$`)
)

type ghError struct {
	Message string `json:"message"`
}

var notFound = ghError{"Not Found"}

// repoAPI serves one request under /repos/<full>/ once its token was
// checked: its status, its body and its Link header. Lists are paged as
// GitHub pages them (per_page, default 30, at most 100; page from 1; a
// Link header with next and last before the last page, prev and first
// after the first); issue comments and reviews are listed oldest first,
// pull requests newest first. Bodies are kept and answered verbatim.
// A creation's answer waits, while creations are held, until the client
// goes away or they are released (the returned channel is nil when the
// request created nothing or nothing is held).
func (s *Server) repoAPI(r *http.Request, full, rest string, body []byte) (int, any, string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.created
	status, v, link := s.repoRequest(r, full, rest, body)
	if s.created != before && s.hold != nil {
		return status, v, link, s.hold
	}
	return status, v, link, nil
}

// HoldCreations makes every later creation (a comment, a pull request, a
// review, a merge) happen and then hold its answer until the client goes
// away or ReleaseCreations, as when GitHub's answer is lost: a test can
// end the client meanwhile.
func (s *Server) HoldCreations() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil {
		s.hold = make(chan struct{})
	}
}

// ReleaseCreations answers the held creations and holds no more.
func (s *Server) ReleaseCreations() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

func (s *Server) repoRequest(r *http.Request, full, rest string, body []byte) (int, any, string) {
	var in map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		if len(body) == 0 {
			body = []byte("{}")
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return http.StatusBadRequest, ghError{"Problems parsing JSON"}, ""
		}
	}
	str := func(k string) (string, bool) {
		v, ok := in[k].(string)
		return v, ok
	}
	owner, _, _ := strings.Cut(full, "/")
	st := s.repo(full)
	switch m := issueCommentsRoute.FindStringSubmatch(rest); {
	case m != nil && r.Method == http.MethodPost:
		n, _ := strconv.Atoi(m[1])
		b, ok := str("body")
		if !ok || strings.TrimSpace(b) == "" {
			return http.StatusUnprocessableEntity, ghError{"Validation Failed"}, ""
		}
		s.created++
		return http.StatusCreated, commentJSON(s.addComment(full, n, BotLogin, b)), ""
	case m != nil && r.Method == http.MethodGet:
		n, _ := strconv.Atoi(m[1])
		var all []any
		for _, c := range st.comments {
			if c.Number == n {
				all = append(all, commentJSON(c))
			}
		}
		return s.page(r, all)
	}
	if rest == "/pulls" {
		switch r.Method {
		case http.MethodPost:
			title, _ := str("title")
			head, _ := str("head")
			base, _ := str("base")
			if title == "" || head == "" || base == "" {
				return http.StatusUnprocessableEntity, ghError{"Validation Failed"}, ""
			}
			label := head
			if !strings.Contains(label, ":") {
				label = owner + ":" + head
			}
			for _, p := range st.pulls {
				if p.State == "open" && strings.EqualFold(p.Head, label) && p.Base == base {
					return http.StatusUnprocessableEntity, ghError{"Validation Failed: a pull request already exists for " + label}, ""
				}
			}
			b, _ := str("body")
			draft, _ := in["draft"].(bool)
			st.number++
			sum := sha1.Sum([]byte(full + " " + label + " " + strconv.Itoa(st.number)))
			_, ref, _ := strings.Cut(label, ":")
			p := &Pull{Number: st.number, Author: BotLogin, Title: title, Body: b, Head: label, HeadRef: ref, HeadSHA: hex.EncodeToString(sum[:]), Base: base, Draft: draft, State: "open"}
			st.pulls = append(st.pulls, p)
			s.created++
			return http.StatusCreated, s.pullJSON(full, p), ""
		case http.MethodGet:
			q := r.URL.Query()
			state := q.Get("state")
			if state == "" {
				state = "open"
			}
			var all []any
			for _, p := range slices.Backward(st.pulls) {
				if (state == "all" || p.State == state) && (q.Get("head") == "" || strings.EqualFold(q.Get("head"), p.Head)) && (q.Get("base") == "" || q.Get("base") == p.Base) {
					all = append(all, s.pullJSON(full, p))
				}
			}
			return s.page(r, all)
		}
	}
	pull := func(num string) *Pull {
		n, _ := strconv.Atoi(num)
		for _, p := range st.pulls {
			if p.Number == n {
				return p
			}
		}
		return nil
	}
	if m := pullRoute.FindStringSubmatch(rest); m != nil && r.Method == http.MethodGet {
		if p := pull(m[1]); p != nil {
			return http.StatusOK, s.pullJSON(full, p), ""
		}
		return http.StatusNotFound, notFound, ""
	}
	if m := reviewsRoute.FindStringSubmatch(rest); m != nil {
		p := pull(m[1])
		if p == nil {
			return http.StatusNotFound, notFound, ""
		}
		switch r.Method {
		case http.MethodPost:
			ev, _ := str("event")
			b, _ := str("body")
			commit, _ := str("commit_id")
			state := map[string]string{"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}[ev]
			if state == "" || state != "APPROVED" && strings.TrimSpace(b) == "" {
				return http.StatusUnprocessableEntity, ghError{"Validation Failed"}, ""
			}
			if commit == "" {
				commit = p.HeadSHA
			}
			s.n++
			rv := Review{ID: int64(s.n), Number: p.Number, Author: BotLogin, State: state, Body: b, CommitID: commit}
			st.reviews = append(st.reviews, rv)
			s.created++
			return http.StatusOK, s.reviewJSON(full, rv), ""
		case http.MethodGet:
			var all []any
			for _, rv := range st.reviews {
				if rv.Number == p.Number {
					all = append(all, s.reviewJSON(full, rv))
				}
			}
			return s.page(r, all)
		}
	}
	if m := mergeRoute.FindStringSubmatch(rest); m != nil && r.Method == http.MethodPut {
		p := pull(m[1])
		if p == nil {
			return http.StatusNotFound, notFound, ""
		}
		if p.Merged || p.State != "open" {
			return http.StatusMethodNotAllowed, ghError{"Pull Request is not mergeable"}, ""
		}
		if sha, _ := str("sha"); sha != "" && sha != p.HeadSHA {
			return http.StatusConflict, ghError{"Head branch was modified. Review and try the merge again."}, ""
		}
		sum := sha1.Sum([]byte("merge " + p.HeadSHA))
		p.Merged, p.State, p.MergeSHA = true, "closed", hex.EncodeToString(sum[:])
		s.created++
		return http.StatusOK, map[string]any{"sha": p.MergeSHA, "merged": true, "message": "Pull Request successfully merged"}, ""
	}
	return http.StatusNotFound, notFound, ""
}

// userJSON is an author as GitHub answers one: a bot's login ends in
// "[bot]".
func userJSON(login string) map[string]any {
	kind := "User"
	if strings.HasSuffix(login, "[bot]") {
		kind = "Bot"
	}
	return map[string]any{"login": login, "type": kind}
}

func commentJSON(c Comment) map[string]any {
	return map[string]any{"id": c.ID, "body": c.Body, "user": userJSON(c.Author), "html_url": c.URL}
}

func (s *Server) pullJSON(full string, p *Pull) map[string]any {
	owner, _, _ := strings.Cut(p.Head, ":")
	return map[string]any{"number": p.Number, "user": userJSON(p.Author), "title": p.Title, "body": p.Body, "state": p.State, "draft": p.Draft, "merged": p.Merged,
		"merge_commit_sha": p.MergeSHA, "html_url": fmt.Sprintf("%s/%s/pull/%d", s.URL, full, p.Number),
		"head": map[string]any{"label": p.Head, "ref": p.HeadRef, "sha": p.HeadSHA, "user": map[string]any{"login": owner}},
		"base": map[string]any{"ref": p.Base}}
}

func (s *Server) reviewJSON(full string, r Review) map[string]any {
	return map[string]any{"id": r.ID, "body": r.Body, "state": r.State, "commit_id": r.CommitID, "user": userJSON(r.Author),
		"html_url": fmt.Sprintf("%s/%s/pull/%d#pullrequestreview-%d", s.URL, full, r.Number, r.ID)}
}

// page answers one page of all as GitHub does, with its Link header.
func (s *Server) page(r *http.Request, all []any) (int, any, string) {
	q := r.URL.Query()
	per, page := 30, 1
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return http.StatusUnprocessableEntity, ghError{"Validation Failed"}, ""
		}
		per = min(n, 100)
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return http.StatusUnprocessableEntity, ghError{"Validation Failed"}, ""
		}
		page = n
	}
	last := max(1, (len(all)+per-1)/per)
	out := []any{}
	if start := (page - 1) * per; start < len(all) {
		out = all[start:min(start+per, len(all))]
	}
	link := func(p int, rel string) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("per_page", strconv.Itoa(per))
		v.Set("page", strconv.Itoa(p))
		return fmt.Sprintf(`<%s%s?%s>; rel="%s"`, s.URL, r.URL.Path, v.Encode(), rel)
	}
	var links []string
	if page > 1 {
		links = append(links, link(page-1, "prev"), link(1, "first"))
	}
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	return http.StatusOK, out, strings.Join(links, ", ")
}

// Package slacktest is a test helper: a fake of Slack's Web API on
// 127.0.0.1 (conversations.replies, conversations.history and
// chat.postMessage), for the Slack extension's tests and the end-to-end
// suite. It checks what a real client sends (the method's path, POST with
// a form body, the bot token in the form or as a Bearer header, message
// metadata's shape) and refuses what Slack would refuse, so a test fails
// when the client sends something else. As Slack does, it keeps a posted
// message's metadata and answers it only to a read that asks with
// include_all_metadata.
//
// It is never part of a release, and never logs the token it checks.
package slacktest

import (
	"encoding/json"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Message is one message the fake holds.
type Message struct {
	TS       string         `json:"ts"`
	ThreadTS string         `json:"thread_ts,omitempty"`
	User     string         `json:"user,omitempty"`
	BotID    string         `json:"bot_id,omitempty"`
	Text     string         `json:"text"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Request is one request the fake answered.
type Request struct {
	Method string // the Web API method, such as chat.postMessage
	Form   map[string]string
	// Bearer reports whether the token came as a Bearer header (else in
	// the form); the token itself is not kept.
	Bearer bool
}

// Server is the fake Slack Web API.
type Server struct {
	srv   *httptest.Server
	token string

	mu        sync.Mutex
	channels  map[string][]Message // by channel, in ts order
	requests  []Request
	next      int64
	rateLimit int // the next n calls are answered 429
	BotID     string
	BotUser   string
}

// New starts a fake that accepts token, listening on 127.0.0.1. Close it
// when done.
func New(token string) *Server {
	s := &Server{token: token, channels: map[string][]Message{}, next: 1712345678, BotID: "B0FAKEBOT", BotUser: "U0FAKEBOT"}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s.srv.Listener = ln
	s.srv.Start()
	return s
}

// URL is the Web API's base URL, for slack.OptionAPIURL and the
// extension's api.url: it ends in /api/.
func (s *Server) URL() string { return s.srv.URL + "/api/" }

// Close stops the fake.
func (s *Server) Close() { s.srv.Close() }

// AddChannel makes a channel the fake knows.
func (s *Server) AddChannel(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.channels[id]; !ok {
		s.channels[id] = nil
	}
}

// Say adds a person's message to channel (in thread root when given) and
// answers its ts.
func (s *Server) Say(channel, root, user, text string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.add(channel, Message{ThreadTS: root, User: user, Text: text})
}

func (s *Server) add(channel string, m Message) string {
	s.next++
	m.TS = strconv.FormatInt(s.next, 10) + ".000100"
	s.channels[channel] = append(s.channels[channel], m)
	return m.TS
}

// RateLimit answers the next n calls with 429 and Retry-After.
func (s *Server) RateLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimit = n
}

// Messages are a channel's messages, in ts order.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.channels[channel]...)
}

// Requests are the requests answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// metadataType is the event_type Slack accepts in a message's metadata.
var metadataType = regexp.MustCompile(`^[a-zA-Z0-9_]{1,255}$`)

func reply(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code string) { reply(w, map[string]any{"ok": false, "error": code}) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok || r.Method != http.MethodPost {
		http.Error(w, "not a Web API call", http.StatusNotFound)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		http.Error(w, "a form body is expected", http.StatusBadRequest)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	tok, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !bearer {
		tok = r.PostForm.Get("token")
	}
	form := map[string]string{}
	for k := range r.PostForm {
		if k != "token" {
			form[k] = r.PostForm.Get(k)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Method: method, Form: form, Bearer: bearer})
	if s.rateLimit > 0 {
		s.rateLimit--
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	if tok == "" {
		fail(w, "not_authed")
		return
	}
	if tok != s.token {
		fail(w, "invalid_auth")
		return
	}
	switch method {
	case "conversations.replies":
		s.replies(w, form)
	case "conversations.history":
		s.history(w, form)
	case "chat.postMessage":
		s.postMessage(w, form)
	default:
		fail(w, "unknown_method")
	}
}

func (s *Server) replies(w http.ResponseWriter, form map[string]string) {
	msgs, ok := s.channels[form["channel"]]
	if !ok {
		fail(w, "channel_not_found")
		return
	}
	root := form["ts"]
	var thread []Message
	for _, m := range msgs {
		if m.TS == root || m.ThreadTS == root {
			thread = append(thread, m)
		}
	}
	if len(thread) == 0 || thread[0].TS != root {
		fail(w, "thread_not_found")
		return
	}
	sort.SliceStable(thread, func(i, j int) bool { return thread[i].TS < thread[j].TS })
	limit := 1000
	if form["limit"] != "" {
		n, err := strconv.Atoi(form["limit"])
		if err != nil || n < 1 {
			fail(w, "invalid_limit")
			return
		}
		limit = n
	}
	start := 0
	if c := form["cursor"]; c != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(c, "cur_"))
		if err != nil || n < 0 || n > len(thread) {
			fail(w, "invalid_cursor")
			return
		}
		start = n
	}
	end := min(start+limit, len(thread))
	page := []map[string]any{}
	for _, m := range thread[start:end] {
		d := messageJSON(m, form)
		d["thread_ts"] = root
		page = append(page, d)
	}
	next := ""
	if end < len(thread) {
		next = fmt.Sprintf("cur_%d", end)
	}
	reply(w, map[string]any{"ok": true, "messages": page, "has_more": next != "", "response_metadata": map[string]any{"next_cursor": next}})
}

// messageJSON is m as Slack answers it to a read with form: its metadata
// only when the read asks with include_all_metadata.
func messageJSON(m Message, form map[string]string) map[string]any {
	d := map[string]any{"type": "message", "ts": m.TS, "text": m.Text}
	if m.ThreadTS != "" {
		d["thread_ts"] = m.ThreadTS
	}
	if m.User != "" {
		d["user"] = m.User
	}
	if m.BotID != "" {
		d["bot_id"] = m.BotID
	}
	if v := form["include_all_metadata"]; (v == "1" || v == "true") && m.Metadata != nil {
		d["metadata"] = m.Metadata
	}
	return d
}

// history answers a channel's top-level messages, newest first, a page at
// a time (limit, default 100; cursor).
func (s *Server) history(w http.ResponseWriter, form map[string]string) {
	msgs, ok := s.channels[form["channel"]]
	if !ok {
		fail(w, "channel_not_found")
		return
	}
	var top []Message
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].ThreadTS == "" || msgs[i].ThreadTS == msgs[i].TS {
			top = append(top, msgs[i])
		}
	}
	limit := 100
	if form["limit"] != "" {
		n, err := strconv.Atoi(form["limit"])
		if err != nil || n < 1 {
			fail(w, "invalid_limit")
			return
		}
		limit = min(n, 999)
	}
	start := 0
	if c := form["cursor"]; c != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(c, "hist_"))
		if err != nil || n < 0 || n > len(top) {
			fail(w, "invalid_cursor")
			return
		}
		start = n
	}
	end := min(start+limit, len(top))
	page := []map[string]any{}
	for _, m := range top[start:end] {
		page = append(page, messageJSON(m, form))
	}
	next := ""
	if end < len(top) {
		next = fmt.Sprintf("hist_%d", end)
	}
	reply(w, map[string]any{"ok": true, "messages": page, "has_more": next != "", "response_metadata": map[string]any{"next_cursor": next}})
}

func (s *Server) postMessage(w http.ResponseWriter, form map[string]string) {
	channel := form["channel"]
	if _, ok := s.channels[channel]; !ok {
		fail(w, "channel_not_found")
		return
	}
	if form["text"] == "" {
		fail(w, "no_text")
		return
	}
	m := Message{ThreadTS: form["thread_ts"], BotID: s.BotID, User: s.BotUser, Text: form["text"]}
	if m.ThreadTS != "" {
		found := false
		for _, o := range s.channels[channel] {
			found = found || o.TS == m.ThreadTS
		}
		if !found {
			fail(w, "thread_not_found")
			return
		}
	}
	if md := form["metadata"]; md != "" {
		if err := json.Unmarshal([]byte(md), &m.Metadata); err != nil {
			fail(w, "invalid_metadata_format")
			return
		}
		et, _ := m.Metadata["event_type"].(string)
		_, payload := m.Metadata["event_payload"].(map[string]any)
		if !metadataType.MatchString(et) || !payload {
			fail(w, "invalid_metadata_schema")
			return
		}
	}
	ts := s.add(channel, m)
	reply(w, map[string]any{"ok": true, "channel": channel, "ts": ts, "message": map[string]any{"text": m.Text, "ts": ts, "thread_ts": m.ThreadTS, "bot_id": m.BotID}})
}

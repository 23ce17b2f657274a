package github

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden Events in testdata")

// Each recorded payload shape maps to its type, correlation key and the
// data pinned in testdata/<name>.event.golden.
func TestMapRecordedPayloads(t *testing.T) {
	cases := []struct {
		file, event, typ, key string
		installation          int64
	}{
		{"issues.opened.json", "issues", "github.issues.opened", "octo-org/hello-world#42", 31337},
		{"issue_comment.created.json", "issue_comment", "github.issue_comment.created", "octo-org/hello-world#7", 0},
		{"pull_request.review_requested.json", "pull_request", "github.pull_request.review_requested", "octo-org/hello-world#7", 31337},
		{"pull_request_review.submitted.json", "pull_request_review", "github.pull_request_review.submitted", "octo-org/hello-world#7", 0},
		{"pull_request_review_comment.created.json", "pull_request_review_comment", "github.pull_request_review_comment.created", "octo-org/hello-world#7", 0},
		{"check_suite.completed.json", "check_suite", "github.check_suite.completed", "octo-org/hello-world#7", 31337},
		{"check_run.completed.json", "check_run", "github.check_run.completed", "octo-org/hello-world@ffffffffffffffffffffffffffffffffffffffff", 0},
		{"push.json", "push", "github.push", "octo-org/hello-world@refs/heads/main", 0},
		{"ping.json", "ping", "github.ping", "octo-org/hello-world", 0},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			m, reason := mapDelivery(c.event, body)
			if reason != "" {
				t.Fatalf("dropped: %s", reason)
			}
			if m.Type != c.typ || m.Key != c.key || m.Repository != "octo-org/hello-world" || m.Installation != c.installation {
				t.Fatalf("mapped to %q %q %q %d; want %q %q %d", m.Type, m.Key, m.Repository, m.Installation, c.typ, c.key, c.installation)
			}
			got, err := json.MarshalIndent(m.Data, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", strings.TrimSuffix(c.file, ".json")+".event.golden")
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(bytes.TrimSpace(want), got) {
				t.Fatalf("data differs from %s:\n%s", golden, got)
			}
			// The data is a subset: nothing of the hook's config, no
			// e-mail address, no node id.
			for _, absent := range []string{"hooks.example.com", "@example.com", "node_id", "MDIz"} {
				if bytes.Contains(got, []byte(absent)) {
					t.Fatalf("data carries %q:\n%s", absent, got)
				}
			}
		})
	}
}

func TestMapRefusesWhatItCannotMap(t *testing.T) {
	for _, c := range []struct {
		event, body, reason string
	}{
		{"deployment", `{"action":"created"}`, reasonEventUnsupported},
		{"issues", `{"action":"Opened!","issue":{"number":1}}`, reasonEventUnsupported},
		{"issues", `not json`, reasonPayloadInvalid},
		{"issues", `{"action":"opened"}`, reasonPayloadInvalid},
		{"pull_request", `{"action":"opened"}`, reasonPayloadInvalid},
		{"check_suite", `{"action":"completed"}`, reasonPayloadInvalid},
	} {
		if _, reason := mapDelivery(c.event, []byte(c.body)); reason != c.reason {
			t.Errorf("%s %s: %q, want %q", c.event, c.body, reason, c.reason)
		}
	}
}

// Long texts are cut at a character boundary and marked; lists are
// bounded.
func TestMapBoundsTheData(t *testing.T) {
	long := strings.Repeat("é", maxBodyBytes) // two bytes each
	labels := make([]map[string]string, 50)
	for i := range labels {
		labels[i] = map[string]string{"name": "l"}
	}
	body, _ := json.Marshal(map[string]any{
		"action":     "created",
		"repository": map[string]any{"full_name": "o/r"},
		"issue":      map[string]any{"number": 1, "title": long, "labels": labels},
		"comment":    map[string]any{"id": 1, "body": long},
	})
	m, reason := mapDelivery("issue_comment", body)
	if reason != "" {
		t.Fatal(reason)
	}
	cm := m.Data["comment"].(map[string]any)
	if b := cm["body"].(string); len(b) > maxBodyBytes || cm["body_truncated"] != true || !strings.HasPrefix(long, b) || len(b)%2 != 0 {
		t.Fatalf("body of %d bytes, truncated %v", len(b), cm["body_truncated"])
	}
	is := m.Data["issue"].(map[string]any)
	if tl := is["title"].(string); len(tl) > maxTitleBytes || is["title_truncated"] != true {
		t.Fatalf("title of %d bytes", len(tl))
	}
	m2, _ := mapDelivery("issues", body)
	if n := len(m2.Data["issue"].(map[string]any)["labels"].([]string)); n != maxListItems {
		t.Fatalf("%d labels, want %d", n, maxListItems)
	}
	data, _ := json.Marshal(m.Data)
	if len(data) > 3*maxBodyBytes {
		t.Fatalf("data of %d bytes", len(data))
	}
}

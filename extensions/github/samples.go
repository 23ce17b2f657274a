package github

import (
	"encoding/json"
	"slices"

	"github.com/open-conduit/open-conduit/extension"
)

// placeholderRepository names the repository of the samples of a scope
// that claims only installations: the ingress knows no repository of
// theirs.
const placeholderRepository = "example-org/example-repo"

// sampleDeliveries are the deliveries the ingress offers as route-trace
// samples: a name, GitHub's event name and a payload with the
// repository left out. Each goes through the same mapping as a real
// delivery, so a sample traces exactly what such a delivery would send.
var sampleDeliveries = []struct {
	name, event string
	payload     map[string]any
}{
	{"github-issue-opened", "issues", map[string]any{"action": "opened",
		"issue": map[string]any{"number": 1, "title": "A sample issue", "body": "What the issue asks.", "user": map[string]any{"login": "octocat"}}}},
	{"github-issue-comment", "issue_comment", map[string]any{"action": "created",
		"issue":   map[string]any{"number": 1, "title": "A sample issue", "user": map[string]any{"login": "octocat"}},
		"comment": map[string]any{"id": 1, "body": "A sample comment.", "user": map[string]any{"login": "octocat"}}}},
	{"github-pr-opened", "pull_request", map[string]any{"action": "opened",
		"pull_request": map[string]any{"number": 2, "title": "A sample pull request", "user": map[string]any{"login": "octocat"},
			"head": map[string]any{"ref": "feature", "sha": "0000000000000000000000000000000000000001"}, "base": map[string]any{"ref": "main"}}}},
	{"github-review-requested", "pull_request", map[string]any{"action": "review_requested",
		"pull_request":       map[string]any{"number": 2, "title": "A sample pull request", "user": map[string]any{"login": "octocat"}},
		"requested_reviewer": map[string]any{"login": "reviewer"}}},
	{"github-review-submitted", "pull_request_review", map[string]any{"action": "submitted",
		"pull_request": map[string]any{"number": 2, "title": "A sample pull request", "user": map[string]any{"login": "octocat"}},
		"review":       map[string]any{"id": 1, "state": "approved", "body": "Looks good.", "user": map[string]any{"login": "reviewer"}}}},
	{"github-checks-completed", "check_suite", map[string]any{"action": "completed",
		"check_suite": map[string]any{"id": 1, "status": "completed", "conclusion": "success", "head_sha": "0000000000000000000000000000000000000001",
			"head_branch": "feature", "pull_requests": []any{map[string]any{"number": 2}}}}},
	{"github-push", "push", map[string]any{"ref": "refs/heads/main",
		"before": "0000000000000000000000000000000000000000", "after": "0000000000000000000000000000000000000001",
		"pusher": map[string]any{"name": "octocat"}, "commits": []any{map[string]any{"id": "0000000000000000000000000000000000000001"}}}},
}

// Samples offers, for scope, one sample Event of each delivery kind a
// route is most often written for (extension.IngressSampler), about the
// first repository (in name order) the config gives the scope, or a
// placeholder repository when the scope has only installations.
func (ingress) Samples(raw json.RawMessage, scope string) []extension.IngressSample {
	c, err := parseConfig(raw)
	if err != nil {
		return nil
	}
	cl := claimsOf(c)
	if !cl.admits(scope) {
		return nil
	}
	var repos []string
	for lower, sc := range cl.repos {
		if sc == scope {
			repos = append(repos, cl.names[lower])
		}
	}
	slices.Sort(repos)
	repo := placeholderRepository
	if len(repos) > 0 {
		repo = repos[0]
	}
	var out []extension.IngressSample
	for _, d := range sampleDeliveries {
		p := map[string]any{"repository": map[string]any{"full_name": repo}, "sender": map[string]any{"login": "octocat"}}
		for k, v := range d.payload {
			p[k] = v
		}
		body, err := json.Marshal(p)
		if err != nil {
			continue
		}
		m, dropped := mapDelivery(d.event, body)
		if dropped != "" {
			continue
		}
		data, err := json.Marshal(m.Data)
		if err != nil {
			continue
		}
		out = append(out, extension.IngressSample{Name: d.name, Type: m.Type, CorrelationKey: m.Key, Data: data})
	}
	return out
}

var _ extension.IngressSampler = ingress{}

package e2e

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/client"
)

// No secret, secret reference or token appears in any response, any daemon
// log line, or the SQLite files.
func TestNoSecretReferenceOrTokenLeaks(t *testing.T) {
	const refVar = "OC_E2E_CANARY_REF_7b1d"
	const secret = "canary-secret-value-5e9a0c"
	e := newEnv(t)
	fifo, mark := e.fifoJob("env:"+refVar, "")
	d := e.start(refVar + "=" + secret)

	var responses []string
	record := func(resp *client.Response) { responses = append(responses, string(resp.Body)) }
	var created struct {
		Work work `json:"work"`
	}
	resp := e.must("POST", "/v1/work", map[string]any{"scope": "t"}, key(), &created)
	record(resp)
	w := created.Work
	waitStarted(t, mark, 1)
	until(t, "the job reading its context", func() bool {
		b, _ := os.ReadFile(mark)
		return strings.Contains(string(b), "context read")
	})
	// The process got the secret (its length), not from us.
	if b, _ := os.ReadFile(mark); !strings.Contains(string(b), "secret length 26") {
		t.Fatalf("the job did not get its secret: %q", b)
	}
	exes := e.executions(w.ID)
	if len(exes) != 1 {
		t.Fatalf("executions %+v", exes)
	}
	execToken, err := os.ReadFile(filepath.Join(e.state, "runs", runKey(exes[0].ID), "token", "token"))
	if err != nil {
		t.Fatal(err)
	}
	release(t, fifo, 0)
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })

	paths := []string{
		"/v1/health", "/v1/config", "/v1/scopes", "/v1/scopes/t", "/v1/work", "/v1/work/" + client.PathEscape(w.ID),
		"/v1/events", "/v1/executions", "/v1/executions/" + client.PathEscape(exes[0].ID), "/v1/waits",
		"/v1/artifacts", "/v1/toolbelt/calls", "/v1/auth/operators",
	}
	for _, p := range paths {
		record(e.must("GET", p, nil, nil, nil))
	}
	for _, a := range e.artifacts(exes[0].ID) {
		record(e.must("GET", "/v1/artifacts/"+client.PathEscape(a.ID)+"/content", nil, nil, nil))
	}
	record(e.must("POST", "/v1/config/validate", map[string]any{"config": map[string]any{
		"version": 1, "secrets": map[string]string{"x": "env:" + refVar}}}, nil, nil))
	_, err = e.do("GET", "/v1/events?cursor="+url.QueryEscape(secret), nil, nil, nil)
	if err != nil {
		responses = append(responses, err.Error())
	}
	for _, args := range [][]string{{"health"}, {"auth", "operators"}} {
		_, out, stderr := e.cli(args...)
		responses = append(responses, out, stderr)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}

	// Every log line is one structured JSON object.
	for _, line := range strings.Split(strings.TrimSpace(e.allLogs()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] == nil || rec["level"] == nil {
			t.Errorf("log line %q is not a JSON record with level and msg", line)
		}
	}
	opToken, err := os.ReadFile(e.tokenFile())
	if err != nil {
		t.Fatal(err)
	}
	canaries := map[string]string{
		"the secret":           secret,
		"the secret reference": refVar,
		"the operator token":   strings.TrimSpace(string(opToken)),
		"the execution token":  strings.TrimSpace(string(execToken)),
	}
	places := map[string]string{"responses": strings.Join(responses, "\n"), "daemon logs": e.allLogs()}
	for _, name := range []string{"coordination.db", "coordination.db-wal"} {
		b, err := os.ReadFile(filepath.Join(e.state, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		places[name] = string(b)
	}
	if len(places["coordination.db"])+len(places["coordination.db-wal"]) == 0 {
		t.Fatal("no database bytes to search")
	}
	// Control: the search finds a canary where it belongs (the operator's
	// own config file holds the reference), so a clean result means
	// something.
	if b, _ := os.ReadFile(filepath.Join(e.state, "config.json")); !strings.Contains(string(b), refVar) {
		t.Fatal("control: the reference is not in the config file the test wrote")
	}
	for what, canary := range canaries {
		if len(canary) < 8 {
			t.Fatalf("%s is too short to search for", what)
		}
		for where, text := range places {
			if strings.Contains(text, canary) {
				t.Errorf("%s appears in the %s", what, where)
			}
		}
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
)

// The cluster tests run several real daemons, each with a state
// directory of its own, on one database of a throwaway PostgreSQL
// cluster (pgtest), and drive them only through their management
// sockets, their executions' toolbelt sockets and the CLI, as operators
// of several hosts would. They are the evidence of issue 19.

// cluster is one test's daemons on one database, and a directory they all
// see (the markers their jobs write).
type cluster struct {
	t      *testing.T
	store  string // the postgres:// URL of the test's database
	shared string
	cfg    string // the configuration the first daemon started from
	nodes  []*node
	down   map[int]bool // nodes killed
}

// reader is the first node that is up.
func (c *cluster) reader() *node {
	for _, nd := range c.nodes {
		if !c.down[nd.i] {
			return nd
		}
	}
	c.t.Fatal("no daemon of the cluster is up")
	return nil
}

// node is one daemon of a cluster: its own env (state directory, logs)
// and the owner id it leases under.
type node struct {
	*env
	d     *daemon
	owner string
	i     int
}

// ownerRE finds the owner id in the daemon's "daemon ready" line.
var ownerRE = regexp.MustCompile(`"msg":"daemon ready"[^\n]*"owner":"([^"]+)"`)

// newCluster starts n daemons on one fresh database of the binary's
// PostgreSQL cluster. The first starts from the configuration cfg makes
// (given the cluster, whose shared directory it may name) and bootstraps
// the owner's credential; every other one
// starts on an empty state directory into which the first's owner token
// file has been copied, so one token serves at every daemon (the
// credential is a record of the shared store).
func newCluster(t *testing.T, n int, cfg func(*cluster) string) *cluster {
	t.Helper()
	pg := pgtest.Require(t)
	ctx, cancel := within()
	defer cancel()
	db, err := pg.FreshDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := os.MkdirTemp("", "occ")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	c := &cluster{t: t, store: pg.URL(db), shared: shared, down: map[int]bool{}}
	c.cfg = cfg(c)
	for range n {
		c.addNode()
	}
	return c
}

// addNode starts one more daemon on the cluster's store: the first on
// the cluster's configuration, every later one on the first's owner token
// file and configuration documents.
func (c *cluster) addNode() *node {
	c.t.Helper()
	e := newEnv(c.t)
	if err := os.MkdirAll(filepath.Join(e.state, "private"), 0o700); err != nil {
		c.t.Fatal(err)
	}
	if len(c.nodes) == 0 {
		writeFile(c.t, filepath.Join(e.state, "config.json"), []byte(c.cfg))
	} else {
		tok, err := os.ReadFile(c.nodes[0].tokenFile())
		if err != nil {
			c.t.Fatal(err)
		}
		// The owner's credential is in the store; a daemon joining it
		// issues none, and its operator copies the token file (see
		// docs/storage.md, Running several daemons).
		writeFile(c.t, e.tokenFile(), tok)
	}
	nd := &node{env: e, i: len(c.nodes)}
	c.nodes = append(c.nodes, nd)
	c.startNode(nd.i)
	return nd
}

// startNode starts node i's daemon on the cluster's store and waits until
// it is ready.
func (c *cluster) startNode(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	nd.d = nd.start("OPEN_CONDUIT_STORE=" + c.store)
	// Health may say ready a moment before the line is written.
	var m []string
	until(c.t, fmt.Sprintf("daemon %d logging its owner id", i), func() bool {
		m = ownerRE.FindStringSubmatch(nd.d.logs.String())
		return m != nil
	})
	nd.owner = m[1]
}

// logs is every daemon log of the cluster so far, each line prefixed with
// its daemon's number.
func (c *cluster) logs() string {
	var b strings.Builder
	for _, nd := range c.nodes {
		for _, line := range strings.Split(strings.TrimSpace(nd.allLogs()), "\n") {
			fmt.Fprintf(&b, "[%d] %s\n", nd.i, line)
		}
	}
	return b.String()
}

// byOwner is the node whose daemon leases under owner (nil: none).
func (c *cluster) byOwner(owner string) *node {
	for _, nd := range c.nodes {
		if nd.owner == owner {
			return nd
		}
	}
	return nil
}

// config is a configuration with one scope c whose one binding job
// runs script under sh with MARKS naming the cluster's shared directory
// (and FIFO, when fifo is set), with the builtins granted, and the given
// lease and max_running.
func (c *cluster) config(script, fifo, lease string, maxRunning int) string {
	env := `"MARKS": ` + strconv.Quote(c.shared)
	if fifo != "" {
		env += `, "FIFO": ` + strconv.Quote(fifo)
	}
	return `{
  "version": 1,
  "limits": {"max_running": ` + strconv.Itoa(maxRunning) + `, "lease": ` + strconv.Quote(lease) + `, "causal_per_minute": 100000},
  "scopes": {
    "c": {
      "authorization": {"operations": ["declare_outcome", "read_context", "emit"], "reads": ["work", "events"]},
      "bindings": {"job": {
        "executor": "shell",
        "config": {"command": ["sh", "-c", ` + strconv.Quote(script) + `], "env": {` + env + `}},
        "operations": ["declare_outcome", "read_context", "emit"]
      }}
    }
  }
}`
}

// markScript appends "start <execution>" to the Work's marker file in the
// shared directory, runs body, then appends "end <execution>".
func markScript(body string) string {
	m := `m="$MARKS/$OPEN_CONDUIT_WORK_ID"; echo "start $OPEN_CONDUIT_EXECUTION_ID" >> "$m"; `
	if body != "" {
		m += body + "; "
	}
	return m + `echo "end $OPEN_CONDUIT_EXECUTION_ID" >> "$m"`
}

// markLines is the Work's marker file, line by line.
func (c *cluster) markLines(workID string) []string {
	b, err := os.ReadFile(filepath.Join(c.shared, workID))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// noOverlap fails the test unless the Work's marker lines show its
// attempts one after the other: every "start X" is followed by X's end
// (or "killed X", which the test writes once X's process is gone) before
// the next start.
func (c *cluster) noOverlap(workID string, lines []string) {
	c.t.Helper()
	open := ""
	for _, l := range lines {
		what, exe, _ := strings.Cut(l, " ")
		switch what {
		case "start":
			if open != "" {
				c.t.Fatalf("Work %s: %s started while %s still ran: %q", workID, exe, open, lines)
			}
			open = exe
		case "end", "killed":
			if exe != open {
				c.t.Fatalf("Work %s: %q ends %s, which was not running: %q", workID, l, exe, lines)
			}
			open = ""
		default:
			c.t.Fatalf("Work %s: marker line %q", workID, l)
		}
	}
}

// apiCall is one request through a node's client, safe to call from any
// goroutine (it fails nothing itself).
func (nd *node) apiCall(ctx context.Context, method, path string, body any, opts *client.RequestOptions, out any) error {
	cl := client.New(nd.socket(), client.TokenFile(nd.tokenFile()))
	defer cl.CloseIdleConnections()
	resp, err := cl.Do(ctx, method, path, body, opts)
	if err != nil {
		return err
	}
	if out != nil && len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return fmt.Errorf("%s %s answered %s: %v", method, path, resp.Body, err)
		}
	}
	return nil
}

// listAll reads every page of a list through the nodes in turn: page k
// through node (start+k) mod n, each continuing the cursor the page
// before it returned at another daemon.
func listAll[T any](c *cluster, path string, start int) []T {
	c.t.Helper()
	return listPaged[T](c, path, start, 500)
}

// listPaged is listAll with pages of limit items.
func listPaged[T any](c *cluster, path string, start, limit int) []T {
	c.t.Helper()
	var out []T
	cursor := ""
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	for k := 0; ; k++ {
		nd := c.nodes[(start+k)%len(c.nodes)]
		p := path + sep + "limit=" + strconv.Itoa(limit)
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		var pg page[T]
		nd.must("GET", p, nil, nil, &pg)
		out = append(out, pg.Items...)
		if pg.NextCursor == "" {
			return out
		}
		cursor = pg.NextCursor
	}
}

// createSpread creates n Work in scope c through all the nodes, round
// robin, from several goroutines at once, and returns their ids.
func (c *cluster) createSpread(n int) []string {
	c.t.Helper()
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	const workers = 12
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := within()
			defer cancel()
			for i := g; i < n; i += workers {
				var out struct {
					Work work `json:"work"`
				}
				errs[i] = c.nodes[i%len(c.nodes)].apiCall(ctx, "POST", "/v1/work", map[string]any{"scope": "c"}, key(), &out)
				ids[i] = out.Work.ID
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.t.Fatalf("creating Work %d through daemon %d: %v", i, i%len(c.nodes), err)
		}
		if ids[i] == "" {
			c.t.Fatalf("creating Work %d returned no Work", i)
		}
	}
	return ids
}

// waitAllTerminal polls (through the nodes in turn) until every Work of
// scope c has ended, and returns them by id.
func (c *cluster) waitAllTerminal(n int) map[string]work {
	c.t.Helper()
	var ws []work
	k := 0
	until(c.t, fmt.Sprintf("all %d Work ending", n), func() bool {
		k++
		ws = listAll[work](c, "/v1/work?scope=c", k)
		if len(ws) != n {
			return false
		}
		for _, w := range ws {
			if !terminal(w.State) {
				return false
			}
		}
		return true
	})
	out := map[string]work{}
	for _, w := range ws {
		out[w.ID] = w
	}
	return out
}

// 300 Work created through all the daemons at once each run exactly
// once, and more than one daemon ran them.
func TestClusterWorkRunsOnceAcrossTwoDaemons(t *testing.T)   { clusterRunsOnce(t, 2) }
func TestClusterWorkRunsOnceAcrossThreeDaemons(t *testing.T) { clusterRunsOnce(t, 3) }

func clusterRunsOnce(t *testing.T, n int) {
	t.Parallel()
	const total = 300
	c := newCluster(t, n, func(c *cluster) string { return c.config(markScript(""), "", "15s", 16) })
	ids := c.createSpread(total)
	ws := c.waitAllTerminal(total)
	for _, id := range ids {
		if w, ok := ws[id]; !ok || w.State != "succeeded" {
			t.Fatalf("Work %s ended %+v, want succeeded\n%s", id, w, c.logs())
		}
	}
	exes := listAll[execution](c, "/v1/executions?scope=c", 1)
	per := map[string][]execution{}
	ran := map[string]int{}
	for _, x := range exes {
		per[x.Work] = append(per[x.Work], x)
		nd := c.byOwner(x.Owner)
		if nd == nil {
			t.Fatalf("execution %s is owned by %q, no daemon of the cluster", x.ID, x.Owner)
		}
		ran[x.Owner]++
	}
	for _, id := range ids {
		xs := per[id]
		if len(xs) != 1 || xs[0].State != "finished" || xs[0].Result != "succeeded" {
			t.Fatalf("Work %s has executions %+v, want exactly one that succeeded", id, xs)
		}
		lines := c.markLines(id)
		want := []string{"start " + xs[0].ID, "end " + xs[0].ID}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Fatalf("Work %s's job ran %q, want once as %s", id, lines, xs[0].ID)
		}
	}
	if len(exes) != total {
		t.Fatalf("%d executions for %d Work", len(exes), total)
	}
	t.Logf("executions per daemon: %v", ran)
	if len(ran) < 2 {
		t.Fatalf("one daemon ran all %d Work (%v): the Work did not spread", total, ran)
	}
}

// clusterEvent is an Event as the list shows it (the fields read here).
type clusterEvent struct {
	Seq       int64  `json:"seq"`
	ID        string `json:"id"`
	Type      string `json:"type"`
	Work      string `json:"work"`
	Execution string `json:"execution"`
}

// emitter accepts operator Events through the nodes it is told are up,
// round robin from several goroutines, until stopped, and keeps what each
// accepted Event was answered with.
type emitter struct {
	c     *cluster
	limit int
	mu    sync.Mutex
	down  map[int]bool
	got   map[string]int64 // accepted Event id -> seq
	errs  []error
	stop  chan struct{}
	wg    sync.WaitGroup
}

// emitEvents starts workers goroutines, each emitting through the up
// nodes in turn; limit > 0 stops each after that many Events.
func (c *cluster) emitEvents(workers, limit int) *emitter {
	em := &emitter{c: c, limit: limit, down: map[int]bool{}, got: map[string]int64{}, stop: make(chan struct{})}
	for g := range workers {
		em.wg.Add(1)
		go func() {
			defer em.wg.Done()
			ctx, cancel := within()
			defer cancel()
			for k := 0; limit <= 0 || k < limit; k++ {
				select {
				case <-em.stop:
					return
				default:
				}
				if k > 0 && limit <= 0 {
					// An open-ended emitter paces itself, so that it
					// goes on through the test without hogging the
					// machine.
					time.Sleep(4 * poll)
				}
				nd := c.nodes[(g+k)%len(c.nodes)]
				em.mu.Lock()
				down := em.down[nd.i]
				em.mu.Unlock()
				if down {
					continue
				}
				var out struct {
					Event clusterEvent `json:"event"`
				}
				err := nd.apiCall(ctx, "POST", "/v1/events", map[string]any{"scope": "c", "type": "cluster.ping", "data": map[string]any{"g": g, "k": k}}, key(), &out)
				em.mu.Lock()
				switch {
				case err != nil && em.down[nd.i]:
					// Cut off by the kill: it may or may not have been
					// accepted; the sequence shows which.
				case err != nil:
					em.errs = append(em.errs, fmt.Errorf("daemon %d: %w", nd.i, err))
				default:
					em.got[out.Event.ID] = out.Event.Seq
				}
				em.mu.Unlock()
			}
		}()
	}
	return em
}

// markDown stops the emitter using node i (before it is killed).
func (em *emitter) markDown(i int) {
	em.mu.Lock()
	em.down[i] = true
	em.mu.Unlock()
}

// finish stops the emitter (one with a limit once each worker has
// reached it), waits for it and returns what was accepted.
func (em *emitter) finish() map[string]int64 {
	em.c.t.Helper()
	if em.limit > 0 {
		em.wg.Wait()
	}
	close(em.stop)
	em.wg.Wait()
	if len(em.errs) > 0 {
		em.c.t.Fatalf("%d Events were refused, the first: %v", len(em.errs), em.errs[0])
	}
	return em.got
}

// wholeSequence reads every Event through the up nodes (each page
// through the next node, continuing the previous page's cursor) and
// fails unless their seqs are exactly 1..n in order, no id twice, and
// every accepted Event is there with the seq it was answered with.
func (c *cluster) wholeSequence(up []int, limit int, accepted map[string]int64) []clusterEvent {
	c.t.Helper()
	sub := &cluster{t: c.t}
	for _, i := range up {
		sub.nodes = append(sub.nodes, c.nodes[i])
	}
	var first []clusterEvent
	for start := range sub.nodes {
		evs := listPaged[clusterEvent](sub, "/v1/events?scope=c", start, limit)
		checkSequence(c.t, evs, accepted)
		if first == nil {
			first = evs
			continue
		}
		if len(evs) != len(first) {
			c.t.Fatalf("reading from daemon %d found %d Events, from daemon %d %d", sub.nodes[start].i, len(evs), sub.nodes[0].i, len(first))
		}
	}
	return first
}

// checkSequence fails unless evs are seq 1..n in order with no id twice
// and every accepted Event is among them with its answered seq.
func checkSequence(t *testing.T, evs []clusterEvent, accepted map[string]int64) {
	t.Helper()
	seen := map[string]int64{}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("Event %d of the list has seq %d: the sequence has a gap or is out of order (previous %+v)", i+1, ev.Seq, evs[max(i-1, 0)])
		}
		if _, dup := seen[ev.ID]; dup {
			t.Fatalf("Event %s is listed twice", ev.ID)
		}
		seen[ev.ID] = ev.Seq
	}
	for id, seq := range accepted {
		if got, ok := seen[id]; !ok || got != seq {
			t.Fatalf("accepted Event %s (seq %d) is listed at seq %d (listed: %v)", id, seq, got, ok)
		}
	}
}

// Events accepted at once through three daemons, from operators and from
// executions' os emit, form one gap-free sequence, the same whichever
// daemon reads it, with cursor pages continued at other daemons.
func TestClusterEventsFormOneSequence(t *testing.T) {
	t.Parallel()
	const works, perWork = 12, 5
	emit := `for i in 1 2 3 4 5; do os emit cluster.emitted --data "{\"i\": $i}" > /dev/null || exit 1; done`
	c := newCluster(t, 3, func(c *cluster) string { return c.config(markScript(emit), "", "15s", 8) })
	// A reader checks, while the Events are accepted, that every read
	// through any daemon shows a prefix without a hole.
	stopRead := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		ctx, cancel := within()
		defer cancel()
		for k := 0; ; k++ {
			select {
			case <-stopRead:
				readErr <- nil
				return
			default:
			}
			if k > 0 {
				time.Sleep(poll)
			}
			var pg page[clusterEvent]
			if err := c.nodes[k%3].apiCall(ctx, "GET", "/v1/events?limit=500", nil, nil, &pg); err != nil {
				readErr <- err
				return
			}
			for i, ev := range pg.Items {
				if ev.Seq != int64(i+1) {
					readErr <- fmt.Errorf("a read through daemon %d saw seq %d at position %d", k%3, ev.Seq, i+1)
					return
				}
			}
		}
	}()
	em := c.emitEvents(9, 20)
	ids := c.createSpread(works)
	// The CLI's emit through each daemon, while the others go on.
	cli := map[string]int64{}
	for _, nd := range c.nodes {
		for k := range 2 {
			var out struct {
				Event clusterEvent `json:"event"`
			}
			nd.cliJSON(&out, "emit", "cluster.cli", "--scope", "c", "--data", fmt.Sprintf(`{"daemon": %d, "k": %d}`, nd.i, k))
			cli[out.Event.ID] = out.Event.Seq
		}
	}
	accepted := em.finish()
	ops := len(accepted)
	for id, seq := range cli {
		accepted[id] = seq
	}
	ws := c.waitAllTerminal(works)
	close(stopRead)
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if ws[id].State != "succeeded" {
			t.Fatalf("Work %s ended %+v\n%s", id, ws[id], c.logs())
		}
	}
	evs := c.wholeSequence([]int{0, 1, 2}, 37, accepted)
	byType := map[string]int{}
	emitters := map[string]bool{}
	for _, ev := range evs {
		byType[ev.Type]++
		if ev.Type == "cluster.emitted" {
			emitters[ev.Execution] = true
		}
	}
	if byType["cluster.ping"] != ops || ops != 9*20 || byType["cluster.cli"] != len(cli) || len(cli) != 2*len(c.nodes) {
		t.Fatalf("%d + %d operator Events listed, %d + %d accepted, want %d + %d", byType["cluster.ping"], byType["cluster.cli"], ops, len(cli), 9*20, 2*len(c.nodes))
	}
	if byType["cluster.emitted"] != works*perWork || len(emitters) != works {
		t.Fatalf("%d Events emitted by %d executions, want %d by %d", byType["cluster.emitted"], len(emitters), works*perWork, works)
	}
	t.Logf("%d Events in one sequence: %v", len(evs), byType)
}

// runDirOf is the run directory of an execution on the node that runs it.
func (nd *node) runDirOf(executionID string) string {
	return filepath.Join(nd.state, "runs", runKey(executionID))
}

// osEnvOn is the environment that points os at an execution's own
// toolbelt socket and token file on the node that serves it.
func (nd *node) osEnvOn(executionID string) []string {
	dir := nd.runDirOf(executionID)
	return []string{"OS_ENDPOINT=" + filepath.Join(dir, "toolbelt.sock"), "OS_TOKEN_FILE=" + filepath.Join(dir, "token", "token")}
}

// runningOn waits until the Work has a running execution whose job has
// started, and returns it with the node that owns it.
func (c *cluster) runningOn(workID string, not ...string) (execution, *node) {
	c.t.Helper()
	var x execution
	until(c.t, "Work "+workID+" running", func() bool {
		for _, e := range c.reader().executions(workID) {
			if e.State == "running" && !contains(not, e.ID) && contains(c.markLines(workID), "start "+e.ID) {
				x = e
				return true
			}
		}
		return false
	})
	nd := c.byOwner(x.Owner)
	if nd == nil {
		c.t.Fatalf("execution %s is owned by %q, no daemon of the cluster", x.ID, x.Owner)
	}
	return x, nd
}

// An apply through one daemon that narrows a binding's grant makes the
// live token of an execution another daemon serves refused on its next
// call.
func TestClusterApplyNarrowsATokenServedByAnotherDaemon(t *testing.T) {
	t.Parallel()
	fifo := ""
	c := newCluster(t, 2, func(c *cluster) string {
		fifo = filepath.Join(c.shared, "fifo")
		return c.config(markScript(`read code < "$FIFO"`), fifo, "15s", 4)
	})
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	w := c.nodes[0].createWork("c")
	x, served := c.runningOn(w.ID)
	other := c.nodes[1-served.i]
	osEnv := served.osEnvOn(x.ID)
	if code, out, stderr := served.run(bins.os, osEnv, "call", "read_context"); code != 0 || !strings.Contains(out, w.ID) {
		t.Fatalf("read_context before the apply: exit %d %q %q", code, out, stderr)
	}
	var cfg configView
	other.must("GET", "/v1/config", nil, nil, &cfg)
	if cfg.Generation != 1 {
		t.Fatalf("daemon %d's active generation is %d, want the first", other.i, cfg.Generation)
	}
	narrowed := strings.ReplaceAll(c.cfg, `"declare_outcome", "read_context", "emit"`, `"declare_outcome", "emit"`)
	if narrowed == c.cfg {
		t.Fatal("the test's config did not change")
	}
	var applied struct {
		Generation int64 `json:"generation"`
	}
	other.must("POST", "/v1/config/apply", map[string]any{"config": json.RawMessage(narrowed), "expected_generation": cfg.Generation}, key(), &applied)
	if applied.Generation != cfg.Generation+1 {
		t.Fatalf("apply through daemon %d: generation %d, want %d", other.i, applied.Generation, cfg.Generation+1)
	}
	code, out, stderr := served.run(bins.os, osEnv, "call", "read_context")
	var seen configView
	served.must("GET", "/v1/config", nil, nil, &seen)
	if code != 1 || !strings.Contains(stderr, "forbidden") {
		release(t, fifo, 0)
		t.Fatalf("after an apply through daemon %d (generation %d), read_context with the token daemon %d serves answered exit %d %q %q, want 1 forbidden; daemon %d's GET /v1/config says generation %d; its errors: %s",
			other.i, applied.Generation, served.i, code, out, strings.TrimSpace(stderr), served.i, seen.Generation, errorLines(served.allLogs()))
	}
	release(t, fifo, 0)
	if got := c.nodes[0].waitWork(w.ID, "ending", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Fatalf("Work ended %+v", got)
	}
}

// errorLines is the ERROR lines of a daemon's JSON log.
func errorLines(logs string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"level":"ERROR"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// others is the numbers of the nodes other than nd.
func (c *cluster) others(nd *node) []int {
	var out []int
	for _, o := range c.nodes {
		if o != nd {
			out = append(out, o.i)
		}
	}
	return out
}

// killHost ends nd as the loss of its host would: its daemon with
// SIGKILL, then the process group of every execution it supervised, and
// waits until none of them is alive.
func (c *cluster) killHost(nd *node) {
	c.t.Helper()
	c.down[nd.i] = true
	nd.d.kill()
	paths, _ := filepath.Glob(filepath.Join(nd.state, "executions", "*", "supervisor.json"))
	var groups []int
	for _, p := range paths {
		var rec supervisorRecord
		if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &rec) == nil && rec.PID > 1 {
			groups = append(groups, rec.PID)
		}
	}
	killExecutions(nd.state)
	for _, g := range groups {
		until(c.t, fmt.Sprintf("process group %d ending", g), func() bool { return !groupAlive(g) })
	}
}

// kill -9 of the daemon running an attempt (and of its processes, as when
// its host is lost): once the attempt's lease expires a survivor takes it
// over, the Work is run again by the retry policy on a survivor and
// succeeds, its job never ran twice at once, and every Event accepted
// through any daemon, before, during and after, is in one gap-free
// sequence.
func TestClusterKilledDaemonsWorkIsRecoveredByASurvivor(t *testing.T) {
	t.Parallel()
	fifo := ""
	c := newCluster(t, 3, func(c *cluster) string {
		fifo = filepath.Join(c.shared, "fifo")
		return c.config(markScript(`read code < "$FIFO"`), fifo, "15s", 4)
	})
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	em := c.emitEvents(3, 0)
	w := c.nodes[0].createWork("c")
	first, dead := c.runningOn(w.ID)
	em.markDown(dead.i)
	c.killHost(dead)
	f, err := os.OpenFile(filepath.Join(c.shared, w.ID), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "killed %s\n", first.ID)
	f.Close()
	up := c.others(dead)
	survivor := c.nodes[up[0]]

	// The lease expires and a survivor takes the attempt over: nothing of
	// it is left, so it finishes lost.
	var took execution
	until(t, "a survivor taking the attempt over", func() bool {
		for _, x := range survivor.executions(w.ID) {
			if x.ID == first.ID && x.Epoch > first.Epoch && x.State == "finished" {
				took = x
				return true
			}
		}
		return false
	})
	if nd := c.byOwner(took.Owner); nd == nil || nd == dead {
		t.Fatalf("the attempt was taken over by %q, want a survivor", took.Owner)
	}
	if took.Result != "lost" {
		t.Fatalf("the taken-over attempt finished %s, want lost: %+v", took.Result, took)
	}
	// The retry policy: a lost attempt holds its Work until an operator
	// retries it (here through the other survivor).
	held := survivor.getWork(w.ID)
	if held.BlockedReason == "attempt_lost" {
		c.nodes[up[1]].must("POST", "/v1/work/"+client.PathEscape(w.ID)+"/retry", map[string]any{"reason": "its host is gone"}, key(), nil)
	}
	second, on := c.runningOn(w.ID, first.ID)
	if on == dead {
		t.Fatalf("the dead daemon runs %s", second.ID)
	}
	release(t, fifo, 0)
	if got := survivor.waitWork(w.ID, "ending", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Fatalf("the recovered Work ended %+v\n%s", got, c.logs())
	}
	lines := c.markLines(w.ID)
	c.noOverlap(w.ID, lines)
	want := []string{"start " + first.ID, "killed " + first.ID, "start " + second.ID, "end " + second.ID}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the job ran %q, want %q", lines, want)
	}
	exes := survivor.executions(w.ID)
	if len(exes) != 2 || exes[1].ID != second.ID || exes[1].Result != "succeeded" || c.byOwner(exes[1].Owner) == dead {
		t.Fatalf("executions %+v, want the lost one and %s succeeded on a survivor", exes, second.ID)
	}
	accepted := em.finish()
	evs := c.wholeSequence(up, 50, accepted)
	t.Logf("held %q after the take-over; %d Events, %d accepted by operators", held.BlockedReason, len(evs), len(accepted))
}

// A daemon that joins the cluster while another runs an attempt leaves
// that attempt alone: its lease is live, so it is neither taken over nor
// lost, and the Work runs once to its end on the daemon that claimed it.
func TestClusterJoiningDaemonLeavesLiveAttemptsAlone(t *testing.T) {
	t.Parallel()
	fifo := ""
	c := newCluster(t, 1, func(c *cluster) string {
		fifo = filepath.Join(c.shared, "fifo")
		return c.config(markScript(`read code < "$FIFO"`), fifo, "15s", 4)
	})
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	w := c.nodes[0].createWork("c")
	x, on := c.runningOn(w.ID)
	joined := c.addNode()
	exes := joined.executions(w.ID)
	if len(exes) != 1 || exes[0].ID != x.ID || exes[0].Epoch != x.Epoch || exes[0].Owner != on.owner || exes[0].State != "running" {
		release(t, fifo, 0)
		t.Fatalf("after daemon %d joined, Work %s's executions are %+v, want %s still running at epoch %d under daemon %d (%s); the joining daemon's log: %s",
			joined.i, w.ID, exes, x.ID, x.Epoch, on.i, on.owner, recoveryLines(joined.allLogs()))
	}
	release(t, fifo, 0)
	if got := joined.waitWork(w.ID, "ending", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Fatalf("Work ended %+v", got)
	}
	if lines := c.markLines(w.ID); strings.Join(lines, "\n") != "start "+x.ID+"\nend "+x.ID {
		t.Fatalf("the job ran %q, want once as %s", lines, x.ID)
	}
}

// recoveryLines is a daemon log's lines about recovering or losing
// attempts.
func recoveryLines(logs string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "recover") || strings.Contains(l, "lost") || strings.Contains(l, "adopt") || strings.Contains(l, `"level":"ERROR"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

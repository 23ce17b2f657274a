package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
)

// The PostgreSQL peer benchmark (-postgres): on one throwaway cluster
// started for the run (pgtest, listening only on a Unix socket in its own
// temporary directory), rounds of the project's daemon on its own SQLite
// (for reference), of one daemon and of two daemons on one database, and
// of River on the same cluster, in turn.
// Every round gets a database (daemons) or schema (River) of its own, so
// no round starts on another's rows.

// schedExecutor is the binding the scheduling rounds' Work runs, and how
// the report names it.
type schedExecutor struct {
	label   string
	binding map[string]any
	// pkg: the binding runs the no-op package, installed into every
	// daemon of a round before the configuration naming it is applied.
	pkg bool
}

// noopPkg is the no-op package executor (noop.go) as the PostgreSQL
// rounds run it.
var noopPkg = schedExecutor{label: "no-op package", binding: map[string]any{"executor": noopExecutor}, pkg: true}

// shellTrue is the executor the SQLite scheduling round runs
// (daemonConfig's "noop").
var shellTrue = schedExecutor{
	label:   "shell `true`",
	binding: map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"true"}}},
}

// pgConfig is the configuration every daemon of a round starts with: one
// scope whose binding is binding. It names nothing of one daemon's own, so
// the daemons of a round hold the same document (the second finds the
// generation the first published, by its hash).
func pgConfig(running int, binding map[string]any) []byte {
	return pgConfigWith(running, binding, false)
}

// pgConfigWith is pgConfig, with the no-op package enabled when pkg is set.
func pgConfigWith(running int, binding map[string]any, pkg bool) []byte {
	cfg := map[string]any{
		"version": 1,
		"limits":  map[string]any{"causal_per_minute": 100000, "max_running": running},
		"scopes": map[string]any{
			"sched": map[string]any{"bindings": map[string]any{"noop": binding}},
		},
	}
	if pkg {
		cfg["extensions"] = map[string]any{noopPackageName: map[string]any{"enabled": true}}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

// startStoreDaemon starts bin on a fresh state directory under root with
// the coordination store at store, cfg as its config file, and waits until
// it is ready; an empty store leaves the daemon on its state directory's
// SQLite. token, when set, is the owner's operator token file of a
// daemon already on store: the owner's credential is a record of the
// shared store, so a daemon joining it is given the token (as an operator
// would copy it) instead of minting another.
func startStoreDaemon(ctx context.Context, bin, root, store string, cfg []byte, token, profile string) (*daemon, error) {
	d := &daemon{root: root, state: filepath.Join(root, "s"), ctl: filepath.Join(root, "c"), exited: make(chan struct{})}
	if err := os.MkdirAll(filepath.Join(d.state, "private"), 0o700); err != nil {
		return nil, err
	}
	if token != "" {
		b, err := os.ReadFile(token)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(d.state, "private", "operator.token"), b, 0o600); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(d.state, "config.json"), cfg, 0o600); err != nil {
		return nil, err
	}
	var args []string
	if store != "" {
		args = append(args, "--store", store)
	}
	if profile != "" {
		args = append(args, "--cpu-profile", profile)
	}
	if err := d.launch(ctx, bin, args...); err != nil {
		return nil, err
	}
	return d, nil
}

// clusterResult is one scheduling round of one or more daemons on one
// database.
type clusterResult struct {
	schedResult
	// perOwner is how many attempts each daemon (its owner id) ran.
	perOwner []int
	// commits and commitTime are the store's write commits of the
	// daemons over the round and the time they took (their metrics).
	commits    float64
	commitTime time.Duration
}

// storeCommits reads the count and total seconds of the store's commits
// from the daemons' /metrics, summed.
func storeCommits(ctx context.Context, ds []*daemon) (n, secs float64, err error) {
	for _, d := range ds {
		resp, err := d.c.Do(ctx, "GET", "/metrics", nil, nil)
		if err != nil {
			return 0, 0, err
		}
		k, s, err := commitTotals(resp.Body)
		if err != nil {
			return 0, 0, err
		}
		n, secs = n+k, secs+s
	}
	return n, secs, nil
}

// commitTotals reads the store commit histogram's count and sum from a
// Prometheus text exposition; a body without them is an error.
func commitTotals(body []byte) (n, secs float64, err error) {
	found := 0
	for _, line := range strings.Split(string(body), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || (name != "open_conduit_store_commit_seconds_count" && name != "open_conduit_store_commit_seconds_sum") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		if strings.HasSuffix(name, "_count") {
			n = f
		} else {
			secs = f
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("the metrics hold no store commit histogram")
	}
	return n, secs, nil
}

// runClusterSched creates n Work in scope sched, each by its own
// POST /v1/work, from creators at once spread over the daemons' APIs in
// turn, waits until none is ready, running or waiting, and checks that
// each Work succeeded after exactly one attempt.
func runClusterSched(ctx context.Context, ds []*daemon, n, creators int) (*clusterResult, error) {
	cpu := func() (time.Duration, error) {
		var sum time.Duration
		for _, d := range ds {
			t, err := cpuTime(d.pid())
			if err != nil {
				return 0, err
			}
			sum += t
		}
		return sum, nil
	}
	cpu0, err := cpu()
	if err != nil {
		return nil, err
	}
	commits0, secs0, err := storeCommits(ctx, ds)
	if err != nil {
		return nil, err
	}
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	errs := make(chan error, creators)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range creators {
		c := ds[i%len(ds)].c
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if _, err := c.CreateWork(ctx, client.CreateWorkRequest{Scope: "sched"}, nil); err != nil {
					errs <- fmt.Errorf("creating Work: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	// The store is shared: any daemon's API sees every Work.
	c := ds[0].c
	err = poll(ctx, "every Work finished", 10*time.Minute, func() (bool, error) {
		for _, st := range []string{api.WorkReady, api.WorkRunning, api.WorkWaiting} {
			l, err := c.ListWork(ctx, client.WorkFilter{Scope: "sched", State: st, Page: client.Page{Limit: 1}})
			if err != nil {
				return false, err
			}
			if len(l.Items) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	noticed := time.Since(start)
	elapsed, err := finishedSpan(ctx, c, "sched", start, n)
	if err != nil {
		return nil, err
	}
	cpu1, err := cpu()
	if err != nil {
		return nil, err
	}
	commits1, secs1, err := storeCommits(ctx, ds)
	if err != nil {
		return nil, err
	}
	owners, err := checkOnce(ctx, c, n)
	if err != nil {
		return nil, err
	}
	r := &clusterResult{
		schedResult: schedResult{n: n, elapsed: elapsed, lag: noticed - elapsed, perSec: float64(n) / elapsed.Seconds(), cpu: cpu1 - cpu0},
		commits:     commits1 - commits0, commitTime: time.Duration((secs1 - secs0) * float64(time.Second)),
	}
	for _, k := range owners {
		r.perOwner = append(r.perOwner, k)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(r.perOwner)))
	return r, nil
}

// checkOnce pages through every execution of scope sched and checks that
// there are n, one per Work, each succeeded; it returns the attempts per
// owner.
func checkOnce(ctx context.Context, c *client.Client, n int) (map[string]int, error) {
	perWork := map[string]int{}
	owners := map[string]int{}
	page := client.Page{Limit: 500}
	for {
		l, err := c.ListExecutions(ctx, client.ExecutionFilter{Scope: "sched", Page: page})
		if err != nil {
			return nil, err
		}
		for _, e := range l.Items {
			if e.Result != api.ResultSucceeded {
				return nil, fmt.Errorf("execution %s of Work %s ended %s/%s: %s", e.ID, e.Work, e.State, e.Result, e.Message)
			}
			perWork[e.Work]++
			owners[e.Owner]++
		}
		if l.NextCursor == "" {
			break
		}
		page.Cursor = l.NextCursor
	}
	for w, k := range perWork {
		if k != 1 {
			return nil, fmt.Errorf("Work %s had %d attempts, want 1", w, k)
		}
	}
	if len(perWork) != n {
		return nil, fmt.Errorf("%d Work had an attempt, want %d", len(perWork), n)
	}
	return owners, nil
}

// pgRound holds one PostgreSQL round's figures.
type pgRound struct {
	lite, one, two *clusterResult
	river          *schedResult
}

// runPostgres runs the PostgreSQL peer benchmark with the daemon binary
// bin, its Work running ex, under tmp, and reports to w.
func runPostgres(ctx context.Context, o options, bin, tmp string, ex schedExecutor, w io.Writer) error {
	progress(fmt.Sprintf("starting a throwaway PostgreSQL cluster (durable: %v)", o.pgDurable))
	cluster, err := pgtest.StartWith(pgtest.Options{Durable: o.pgDurable, CommitDelay: o.pgCommitDelay, Statements: o.pgStatements > 0})
	if err != nil {
		return fmt.Errorf("PostgreSQL: %w (%s)", err, pgtest.Install)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			progress("stopping the PostgreSQL cluster: " + err.Error())
		}
	}()
	riverDB, err := cluster.FreshDatabase(ctx)
	if err != nil {
		return err
	}
	cfg := pgConfig(o.clients, ex.binding)
	if ex.pkg {
		// The daemons start on shell `true`; the package's binding is
		// applied once it is installed in all of them.
		cfg = pgConfig(o.clients, shellTrue.binding)
	}
	var statements []statementRow
	// daemons runs k daemons on a fresh database, or one on SQLite when
	// k is 0.
	daemons := func(i, k int) (*clusterResult, error) {
		store, name, db := "", "lite", ""
		if k > 0 {
			db, err = cluster.FreshDatabase(ctx)
			if err != nil {
				return nil, err
			}
			store, name = cluster.URL(db), fmt.Sprintf("pg%d-", k)
		}
		var ds []*daemon
		defer func() {
			for _, d := range ds {
				d.stop()
			}
		}()
		for j := range max(k, 1) {
			root := filepath.Join(tmp, fmt.Sprintf("%d%s%d", i, name, j))
			// One at a time: the first publishes the configuration
			// generation, the next finds it.
			token := ""
			if j > 0 {
				token = filepath.Join(ds[0].state, "private", "operator.token")
			}
			d, err := startStoreDaemon(ctx, bin, root, store, cfg, token, profilePath(o.profile, i, fmt.Sprintf("%s%d", name, j)))
			if err != nil {
				return nil, err
			}
			ds = append(ds, d)
		}
		if ex.pkg {
			if err := installNoopAll(ctx, ds, pgConfigWith(o.clients, ex.binding, true)); err != nil {
				return nil, err
			}
		}
		r, err := runClusterSched(ctx, ds, o.work, o.clients)
		if err != nil {
			var logs []string
			for _, d := range ds {
				logs = append(logs, d.logPath)
			}
			return nil, fmt.Errorf("%w (daemon logs %s)", err, strings.Join(logs, ", "))
		}
		if o.pgStatements > 0 && i == 0 && k == 1 {
			if statements, err = readStatements(ctx, cluster.ConnString(riverDB), db); err != nil {
				return nil, err
			}
		}
		if !o.keep {
			for _, d := range ds {
				d.stop()
				os.RemoveAll(d.root)
			}
			ds = nil
		}
		return r, nil
	}
	var rounds []pgRound
	for i := range o.rounds {
		var r pgRound
		if r.lite, err = daemons(i, 0); err != nil {
			return fmt.Errorf("round %d, one daemon on SQLite: %w", i+1, err)
		}
		progress(fmt.Sprintf("round %d one daemon on SQLite: %.1f Work/s", i+1, r.lite.perSec))
		if r.one, err = daemons(i, 1); err != nil {
			return fmt.Errorf("round %d, one daemon: %w", i+1, err)
		}
		progress(fmt.Sprintf("round %d one daemon: %.1f Work/s", i+1, r.one.perSec))
		if r.two, err = daemons(i, 2); err != nil {
			return fmt.Errorf("round %d, two daemons: %w", i+1, err)
		}
		progress(fmt.Sprintf("round %d two daemons: %.1f Work/s (attempts per daemon %v)", i+1, r.two.perSec, r.two.perOwner))
		r.river, err = runRiverPG(ctx, cluster.ConnString(riverDB), fmt.Sprintf("river%d", i+1),
			riverOptions{jobs: o.work, inserters: o.clients, workers: o.clients, fetchCooldown: o.riverCooldown, fetchPoll: o.riverPoll})
		if err != nil {
			return fmt.Errorf("round %d, River: %w", i+1, err)
		}
		progress(fmt.Sprintf("round %d River: %.1f jobs/s", i+1, r.river.perSec))
		rounds = append(rounds, r)
	}
	reportPostgres(w, o, ex, rounds)
	if o.pgStatements > 0 {
		reportStatements(w, statements, o.work, o.pgStatements)
	}
	return nil
}

func reportPostgres(w io.Writer, o options, ex schedExecutor, rs []pgRound) {
	med := func(f func(pgRound) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	cpuPer := func(r *clusterResult) float64 {
		return float64(r.cpu) / float64(time.Millisecond) / float64(r.n)
	}
	lite := med(func(r pgRound) float64 { return r.lite.perSec })
	one := med(func(r pgRound) float64 { return r.one.perSec })
	two := med(func(r pgRound) float64 { return r.two.perSec })
	river := med(func(r pgRound) float64 { return r.river.perSec })
	durable := "fsync, synchronous_commit and full_page_writes on (PostgreSQL's defaults)"
	if !o.pgDurable {
		durable = "fsync, synchronous_commit and full_page_writes off"
	}
	fmt.Fprintf(w, "Machine: %s.\n\n", machine())
	if o.pgCommitDelay > 0 {
		durable += fmt.Sprintf("; every commit waits %s before its WAL flush (commit_delay, commit_siblings 0), as a slower disk's sync would", o.pgCommitDelay)
	}
	fmt.Fprintf(w, "PostgreSQL: one throwaway cluster on a Unix socket, %s.\n\n", durable)
	fmt.Fprintf(w, "Rounds: %d (one daemon on SQLite, one daemon, two daemons, River in turn); medians over rounds. Per round %d Work (and River jobs), %d creators (inserters), max_running %d per daemon, %d River workers.\n\n",
		len(rs), o.work, o.clients, o.clients, o.clients)
	fmt.Fprintln(w, "| what | measured | ratio to River | target |")
	fmt.Fprintln(w, "|---|---|---|---|")
	fmt.Fprintf(w, "| one daemon (%s), Work/s | %.1f | %.2f | ahead of River |\n", ex.label, one, med(func(r pgRound) float64 { return r.one.perSec / r.river.perSec }))
	fmt.Fprintf(w, "| two daemons on one database (%s), Work/s | %.1f | %.2f | ahead of River |\n", ex.label, two, med(func(r pgRound) float64 { return r.two.perSec / r.river.perSec }))
	fmt.Fprintf(w, "| River (riverpgxv5, LISTEN/NOTIFY), jobs/s | %.1f | 1 | |\n", river)
	fmt.Fprintf(w, "| two daemons ÷ one daemon | | %.2f | |\n", med(func(r pgRound) float64 { return r.two.perSec / r.one.perSec }))
	fmt.Fprintf(w, "| for reference: one daemon on its SQLite, Work/s | %.1f | %.2f | |\n", lite, med(func(r pgRound) float64 { return r.lite.perSec / r.river.perSec }))
	fmt.Fprintf(w, "| daemon CPU per Work, on SQLite / one / two daemons (their utime+stime summed) | %.2f / %.2f / %.2f ms | | |\n",
		med(func(r pgRound) float64 { return cpuPer(r.lite) }), med(func(r pgRound) float64 { return cpuPer(r.one) }), med(func(r pgRound) float64 { return cpuPer(r.two) }))
	commitsPer := func(r *clusterResult) float64 { return r.commits / float64(r.n) }
	commitMs := func(r *clusterResult) float64 {
		return float64(r.commitTime) / float64(time.Millisecond) / r.commits
	}
	fmt.Fprintf(w, "| the store's commits per Work, on SQLite / one / two daemons | %.1f / %.1f / %.1f | | |\n",
		med(func(r pgRound) float64 { return commitsPer(r.lite) }), med(func(r pgRound) float64 { return commitsPer(r.one) }), med(func(r pgRound) float64 { return commitsPer(r.two) }))
	fmt.Fprintf(w, "| mean time of one commit, on SQLite / one / two daemons | %.2f / %.2f / %.2f ms | | |\n",
		med(func(r pgRound) float64 { return commitMs(r.lite) }), med(func(r pgRound) float64 { return commitMs(r.one) }), med(func(r pgRound) float64 { return commitMs(r.two) }))
	fmt.Fprintln(w, "\nPer round (SQLite Work/s, one daemon Work/s, two daemons Work/s with attempts per daemon, River jobs/s):")
	fmt.Fprintln(w)
	for i, r := range rs {
		fmt.Fprintf(w, "- round %d: %.1f, %.1f, %.1f %v, %.1f\n", i+1, r.lite.perSec, r.one.perSec, r.two.perSec, r.two.perOwner, r.river.perSec)
	}
}

// installNoopAll installs the no-op package into every daemon of ds (each
// keeps its installed packages in its own state directory), applies cfg
// through the first, and waits until every daemon serves the generation
// it made (the others follow it through the store).
func installNoopAll(ctx context.Context, ds []*daemon, cfg []byte) error {
	for _, d := range ds {
		if err := d.layoutAndInstallNoop(ctx); err != nil {
			return err
		}
	}
	cur, err := ds[0].c.Config(ctx, nil)
	if err != nil {
		return err
	}
	applied, err := ds[0].c.ApplyConfig(ctx, cfg, cur.Generation, "", nil)
	if err != nil {
		return fmt.Errorf("applying the configuration with the no-op binding: %w", err)
	}
	for _, d := range ds {
		for deadline := time.Now().Add(30 * time.Second); ; {
			c, err := d.c.Config(ctx, nil)
			if err == nil && c.Generation == applied.Generation {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("a daemon did not follow generation %d within 30s (%v)", applied.Generation, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

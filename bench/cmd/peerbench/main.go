// Command peerbench measures Open Conduit side by side with a naive floor
// and with a peer (River on SQLite), in one invocation and in alternating
// rounds (floor, project, peer, floor, …), so that load from elsewhere on
// the machine falls on all of them alike; it prints the medians and the
// ratios of issue 18's table as Markdown. With -postgres it runs issue
// 19's rounds instead (pg.go): one and two daemons against River, all on a
// throwaway PostgreSQL cluster of its own on a Unix socket.
//
// The project is the real daemon, built from this repository's
// cmd/open-conduit and started on fresh state directories under a
// temporary directory, driven only through the public clients (client,
// osclient). The bench lives in a module of its own so that River never
// enters the main module's dependencies.
//
// It must never touch a state directory it did not make, send traffic
// anywhere but its own Unix sockets, or leave a process of its own running:
// every daemon is stopped and every execution's process group ended when
// its round is over.
//
// Run from the bench directory:
//
//	go run ./cmd/peerbench -rounds 5
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	repo                     string
	rounds, clients          int
	floorRequests, emits     int
	work, fsyncWork          int
	eventSizes               []int
	eventReps, seeders       int
	riverCooldown, riverPoll time.Duration
	keep                     bool
	postgres, pgDurable      bool
	pgCommitDelay            time.Duration
	pgShell                  bool
	pgStatements             int
	profile                  string
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == noopServeArg {
		if err := noopServe(); err != nil {
			fmt.Fprintln(os.Stderr, "peerbench no-op package:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) == 4 && os.Args[1] == floorServeArg {
		if err := floorServe(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "peerbench floor server:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	var sizes string
	flag.StringVar(&o.repo, "repo", "..", "the repository root, whose cmd/open-conduit is built and measured")
	flag.IntVar(&o.rounds, "rounds", 3, "alternating rounds of floor, project and peer (3 to 10)")
	flag.IntVar(&o.clients, "clients", 16, "concurrency: floor clients, emitting executions, Work creators, max_running, River inserters and workers")
	flag.IntVar(&o.floorRequests, "floor-requests", 200, "requests per floor client and round")
	flag.IntVar(&o.emits, "emits", 200, "emit calls per execution and round")
	flag.IntVar(&o.work, "work", 300, "Work (and River jobs) per scheduling round")
	flag.IntVar(&o.fsyncWork, "fsync-work", 100, "Work of the strace round that counts fsyncs (0 skips it)")
	flag.StringVar(&sizes, "events", "10000,100000", "comma-separated event counts at which the events list is measured (empty skips it)")
	flag.IntVar(&o.eventReps, "event-reps", 15, "pages read per kind and size")
	flag.IntVar(&o.seeders, "seeders", 16, "concurrent POST /v1/events while seeding")
	flag.DurationVar(&o.riverCooldown, "river-fetch-cooldown", time.Millisecond, "River's FetchCooldown (River's default is 100ms; its minimum, 1ms, gives it its best throughput)")
	flag.DurationVar(&o.riverPoll, "river-fetch-poll", 50*time.Millisecond, "River's FetchPollInterval (River's default is 1s)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (databases, daemon logs)")
	flag.BoolVar(&o.postgres, "postgres", false, "run the PostgreSQL peer benchmark instead: one and two daemons and River on one throwaway cluster (uses -rounds, -clients, -work and River's fetch settings)")
	flag.BoolVar(&o.pgShell, "pg-shell", false, "with -postgres: run shell `true` instead of the no-op package executor")
	flag.DurationVar(&o.pgCommitDelay, "pg-commit-delay", 0, "with -postgres: make each of the cluster's commits wait this long before its WAL flush (commit_delay, at most 100ms), standing in for a slower disk's sync")
	flag.IntVar(&o.pgStatements, "pg-statements", 0, "with -postgres: count statements with pg_stat_statements and print the N most called of the first round's one daemon, per Work")
	flag.BoolVar(&o.pgDurable, "pg-durable", true, "with -postgres: run the cluster with fsync and synchronous_commit on (false: off, as the tests' clusters)")
	flag.StringVar(&o.profile, "cpu-profile", "", "write each round's daemon CPU profile into this directory (the daemon's hidden --cpu-profile)")
	flag.Parse()
	if o.rounds < 3 || o.rounds > 10 {
		fmt.Fprintln(os.Stderr, "peerbench: -rounds must be 3 to 10")
		os.Exit(2)
	}
	if o.pgCommitDelay < 0 || o.pgCommitDelay > 100*time.Millisecond {
		fmt.Fprintln(os.Stderr, "peerbench: -pg-commit-delay must be 0 to 100ms (PostgreSQL's commit_delay)")
		os.Exit(2)
	}
	for _, s := range strings.Split(sizes, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "peerbench: -events takes positive whole numbers")
			os.Exit(2)
		}
		o.eventSizes = append(o.eventSizes, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

// round holds one round's figures.
type round struct {
	floor *floorResult
	emit  *emitResult
	sched *schedResult // through the daemon, shell true
	noop  *schedResult // through the daemon, the no-op package
	inner *schedResult // in process, a no-op executor
	river *schedResult
}

func progress(msg string) { fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), msg) }

func run(ctx context.Context, o options, w io.Writer) error {
	repo, err := filepath.Abs(o.repo)
	if err != nil {
		return err
	}
	// Short: socket paths under it must stay below 100 bytes.
	tmp, err := os.MkdirTemp("", "pb")
	if err != nil {
		return err
	}
	if o.keep {
		progress("keeping " + tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	progress("building open-conduit from " + repo)
	bin, err := buildDaemon(repo, tmp)
	if err != nil {
		return err
	}
	if o.postgres {
		ex := noopPkg
		if o.pgShell {
			ex = shellTrue
		}
		return runPostgres(ctx, o, bin, tmp, ex, w)
	}
	var rounds []round
	for i := range o.rounds {
		dir := func(name string) (string, error) {
			p := filepath.Join(tmp, fmt.Sprintf("%d%s", i, name))
			return p, os.Mkdir(p, 0o700)
		}
		var r round
		fd, err := dir("f")
		if err != nil {
			return err
		}
		if r.floor, err = runFloor(ctx, fd, o.clients, o.floorRequests); err != nil {
			return fmt.Errorf("round %d, floor: %w", i+1, err)
		}
		progress(fmt.Sprintf("round %d floor: %.0f req/s, p50 %s", i+1, r.floor.throughput, ms(p50(r.floor.latencies))))

		pd, err := dir("p")
		if err != nil {
			return err
		}
		d, err := startDaemon(ctx, bin, pd, o.clients, profilePath(o.profile, i, "daemon"))
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		r.emit, err = d.runEmit(ctx, o.clients, o.emits)
		if err == nil {
			progress(fmt.Sprintf("round %d emit: %.0f calls/s, p50 %s", i+1, r.emit.throughput, ms(p50(r.emit.latencies))))
			r.sched, err = d.runSched(ctx, schedShell, o.work, o.clients)
		}
		if err == nil {
			progress(fmt.Sprintf("round %d daemon scheduling, shell true: %.1f Work/s", i+1, r.sched.perSec))
			if err = d.installNoop(ctx, o.clients); err == nil {
				r.noop, err = d.runSched(ctx, schedNoop, o.work, o.clients)
			}
		}
		d.stop()
		if err != nil {
			return fmt.Errorf("round %d, project (daemon log %s): %w", i+1, d.logPath, err)
		}
		progress(fmt.Sprintf("round %d daemon scheduling, no-op package: %.1f Work/s", i+1, r.noop.perSec))

		id, err := dir("i")
		if err != nil {
			return err
		}
		if r.inner, err = runInProcess(ctx, id, o.work, o.clients, profilePath(o.profile, i, "inproc")); err != nil {
			return fmt.Errorf("round %d, in process: %w", i+1, err)
		}
		progress(fmt.Sprintf("round %d in-process scheduling: %.1f Work/s", i+1, r.inner.perSec))

		rd, err := dir("r")
		if err != nil {
			return err
		}
		r.river, err = runRiver(ctx, rd, riverOptions{jobs: o.work, inserters: o.clients, workers: o.clients, fetchCooldown: o.riverCooldown, fetchPoll: o.riverPoll})
		if err != nil {
			return fmt.Errorf("round %d, River: %w", i+1, err)
		}
		progress(fmt.Sprintf("round %d River: %.1f jobs/s", i+1, r.river.perSec))
		rounds = append(rounds, r)
		if !o.keep {
			for _, p := range []string{fd, pd, id, rd} {
				os.RemoveAll(p)
			}
		}
	}

	fsyncs, fsyncOK := 0.0, false
	if o.fsyncWork > 0 {
		d, err := startDaemon(ctx, bin, filepath.Join(tmp, "fs"), o.clients, "")
		if err != nil {
			return err
		}
		n, ok, err := d.countFsyncs(ctx, o.fsyncWork, o.clients)
		d.stop()
		if err != nil {
			return fmt.Errorf("fsync round (daemon log %s): %w", d.logPath, err)
		}
		fsyncOK = ok
		if ok {
			fsyncs = float64(n) / float64(o.fsyncWork)
			progress(fmt.Sprintf("fsyncs: %d for %d Work", n, o.fsyncWork))
		} else {
			progress("strace is not installed: no fsync count (apt-get install strace)")
		}
	}

	var ev *eventsResult
	if len(o.eventSizes) > 0 {
		d, err := startDaemon(ctx, bin, filepath.Join(tmp, "ev"), o.clients, "")
		if err != nil {
			return err
		}
		ev, err = d.runEvents(ctx, o.eventSizes, o.seeders, o.eventReps, progress)
		d.stop()
		if err != nil {
			return fmt.Errorf("events (daemon log %s): %w", d.logPath, err)
		}
	}
	report(w, o, rounds, fsyncs, fsyncOK, ev)
	return nil
}

// perRound is the median over rounds of f.
func perRound(rs []round, f func(round) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

func report(w io.Writer, o options, rs []round, fsyncs float64, fsyncOK bool, ev *eventsResult) {
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	floorThr := perRound(rs, func(r round) float64 { return r.floor.throughput })
	floorP50 := perRound(rs, func(r round) float64 { return msf(p50(r.floor.latencies)) })
	floorCPU := perRound(rs, func(r round) float64 { return msf(r.floor.serverCPU) / float64(r.floor.requests) })
	emitThr := perRound(rs, func(r round) float64 { return r.emit.throughput })
	emitP50 := perRound(rs, func(r round) float64 { return msf(p50(r.emit.latencies)) })
	emitCPU := perRound(rs, func(r round) float64 { return msf(r.emit.serverCPU) / float64(r.emit.calls) })
	sched := perRound(rs, func(r round) float64 { return r.sched.perSec })
	schedCPU := perRound(rs, func(r round) float64 { return msf(r.sched.cpu) / float64(r.sched.n) })
	river := perRound(rs, func(r round) float64 { return r.river.perSec })
	thrRatio := perRound(rs, func(r round) float64 { return r.emit.throughput / r.floor.throughput })
	p50Ratio := perRound(rs, func(r round) float64 {
		return float64(p50(r.emit.latencies)) / float64(p50(r.floor.latencies))
	})
	cpuRatio := perRound(rs, func(r round) float64 {
		return (float64(r.emit.serverCPU) / float64(r.emit.calls)) / (float64(r.floor.serverCPU) / float64(r.floor.requests))
	})
	schedRatio := perRound(rs, func(r round) float64 { return r.sched.perSec / r.river.perSec })
	noop := perRound(rs, func(r round) float64 { return r.noop.perSec })
	noopCPU := perRound(rs, func(r round) float64 { return msf(r.noop.cpu) / float64(r.noop.n) })
	noopRatio := perRound(rs, func(r round) float64 { return r.noop.perSec / r.river.perSec })
	noopCommits := perRound(rs, func(r round) float64 { return r.noop.commits / float64(r.noop.n) })
	noopChildCPU := perRound(rs, func(r round) float64 { return msf(r.noop.children) / float64(r.noop.n) })
	inner := perRound(rs, func(r round) float64 { return r.inner.perSec })
	innerCPU := perRound(rs, func(r round) float64 { return msf(r.inner.cpu) / float64(r.inner.n) })
	innerRatio := perRound(rs, func(r round) float64 { return r.inner.perSec / r.river.perSec })
	threadsPer := perRound(rs, func(r round) float64 {
		return float64(r.emit.threadsN-r.emit.threads0) / float64(o.clients)
	})
	threads0 := perRound(rs, func(r round) float64 { return float64(r.emit.threads0) })
	threadsN := perRound(rs, func(r round) float64 { return float64(r.emit.threadsN) })

	fmt.Fprintf(w, "Machine: %s.\n\n", machine())
	fmt.Fprintf(w, "Rounds: %d (floor, project, peer in turn); medians over rounds. Concurrency %d; per round %d floor requests, %d emits, %d Work and %d River jobs.\n\n",
		len(rs), o.clients, o.clients*o.floorRequests, o.clients*o.emits, o.work, o.work)
	fmt.Fprintln(w, "| what | measured | ratio | issue 18's target |")
	fmt.Fprintln(w, "|---|---|---|---|")
	fmt.Fprintf(w, "| toolbelt `emit`, %d executions on their own sockets, throughput ÷ the naive floor | %.0f calls/s vs %.0f req/s | %.2f | ≥ 2 |\n", o.clients, emitThr, floorThr, thrRatio)
	fmt.Fprintf(w, "| `emit` p50 ÷ the floor's p50 | %.2f ms vs %.2f ms | %.2f | ≤ 1.3 |\n", emitP50, floorP50, p50Ratio)
	fmt.Fprintf(w, "| scheduling through the daemon (no-op package executor), Work/s ÷ River jobs/s | %.1f vs %.1f | %.2f | ≥ 2 |\n", noop, river, noopRatio)
	fmt.Fprintf(w, "| scheduling in process (store, kernel and scheduler, a no-op executor), Work/s ÷ River jobs/s | %.1f vs %.1f | %.2f | ≥ 2 |\n", inner, river, innerRatio)
	fmt.Fprintf(w, "| scheduling through the daemon (shell `true`), Work/s ÷ River jobs/s | %.1f vs %.1f | %.2f | |\n", sched, river, schedRatio)
	if fsyncOK {
		fmt.Fprintf(w, "| fsyncs per Work through the daemon (shell `true`), daemon and its children | %.1f (%d Work under strace) | | ≤ 4 |\n", fsyncs, o.fsyncWork)
	} else {
		fmt.Fprintln(w, "| fsyncs per Work through the daemon | not measured: strace is not installed | | ≤ 4 |")
	}
	fmt.Fprintf(w, "| server CPU per emit (daemon utime+stime ÷ emits) | %.3f ms vs the floor's %.3f ms | %.1f× | ≤ 0.25 ms |\n", emitCPU, floorCPU, cpuRatio)
	fmt.Fprintf(w, "| daemon CPU per Work (scheduling round): no-op package / shell `true` | %.2f / %.2f ms | | |\n", noopCPU, schedCPU)
	fmt.Fprintf(w, "| CPU per Work of the no-op package's own process (under the daemon's reaper; beside the daemon's) | %.2f ms | | |\n", noopChildCPU)
	fmt.Fprintf(w, "| write transactions committed per Work through the daemon (no-op package; its batches, from `%s`) | %.2f | | |\n", commitsMetric, noopCommits)
	fmt.Fprintf(w, "| process CPU per Work in process (store, kernel, scheduler and the creators) | %.2f ms | | |\n", innerCPU)
	fmt.Fprintf(w, "| daemon threads per live execution | %.0f threads idle, %.0f with %d sleeping executions | %.2f per execution | O(1) |\n", threads0, threadsN, o.clients, threadsPer)
	if ev != nil {
		for _, p := range ev.pages {
			fmt.Fprintf(w, "| `GET /v1/events` page of 50 at %d events: unfiltered / `type=` (1 in 10) / `type=` (1 in 10,000) | %.2f / %.2f / %.2f ms | %.1f× (rare ÷ unfiltered) | flat from 10k to 1M |\n",
				p.size, msf(p.unfiltered), msf(p.common), msf(p.rare), float64(p.rare)/float64(p.unfiltered))
		}
		fmt.Fprintf(w, "\nSeeding: %d events through `POST /v1/events` (%d at once) took %s, %.0f events/s.\n", ev.seeded, o.seeders, ev.seedTime.Round(time.Second), ev.seedPerSec)
	}
	noopLag := perRound(rs, func(r round) float64 { return msf(r.noop.lag) })
	innerLag := perRound(rs, func(r round) float64 { return msf(r.inner.lag) })
	fmt.Fprintf(w, "\nA scheduling round of the project ends at its last Work's recorded finish, as River's ends at its last completion event. The poll that waits for the end (every 20 ms) noticed it a median of %.1f ms later through the daemon (no-op package) and %.1f ms later in process; that lag is not counted.\n", noopLag, innerLag)
	fmt.Fprintln(w, "\nPer round (floor req/s, emit calls/s, daemon Work/s shell, daemon Work/s no-op, in-process Work/s, River jobs/s):")
	fmt.Fprintln(w)
	for i, r := range rs {
		fmt.Fprintf(w, "- round %d: %.0f, %.0f, %.1f, %.1f, %.1f, %.1f\n", i+1, r.floor.throughput, r.emit.throughput, r.sched.perSec, r.noop.perSec, r.inner.perSec, r.river.perSec)
	}
}

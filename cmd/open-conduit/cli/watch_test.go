package cli

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// driveWatch replaces --watch's ticker with a channel the test sends on.
func driveWatch(t *testing.T) chan<- time.Time {
	t.Helper()
	ticks := make(chan time.Time)
	old := watchTicks
	watchTicks = func() (<-chan time.Time, func()) { return ticks, func() {} }
	t.Cleanup(func() { watchTicks = old })
	return ticks
}

// waitFor polls a running command's output for what it must print (an
// external event), with a generous bound.
func waitFor(t *testing.T, out *syncBuffer, what func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !what(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("the watch never printed it: %q", out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// work list --watch prints the listing, then each Work that appears and
// each that changes, until its context ends; with --json one Work per
// line, its newest state printed again when it changes.
func TestWatchPrintsWhatAppearsAndChanges(t *testing.T) {
	s := serveStack(t)
	ticks := driveWatch(t)
	first := workID.FindString(mustRun(t, 0, "work", "create", "--scope", "setup"))
	for _, tc := range []struct {
		name string
		args []string
	}{{"table", nil}, {"json", []string{"--json"}}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errs syncBuffer
			var code int
			var wg sync.WaitGroup
			wg.Go(func() {
				code = Main(ctx, append([]string{"work", "list", "--watch"}, tc.args...), Streams{In: strings.NewReader(""), Out: &out, Err: &errs})
			})
			waitFor(t, &out, func(o string) bool { return strings.Contains(o, first) })
			ticks <- time.Now() // nothing new: nothing printed
			id := workID.FindString(mustRun(t, 0, "work", "create", "--scope", "setup"))
			ticks <- time.Now()
			waitFor(t, &out, func(o string) bool { return strings.Contains(o, id) })
			if err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
				_, _, err := s.Runtime.FinishWorkInTx(ctx, tx, id, kernel.Finish{State: storage.WorkFailed, Message: "exit status 3"})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			ticks <- time.Now()
			waitFor(t, &out, func(o string) bool { return strings.Count(o, id) == 2 })
			cancel()
			wg.Wait()
			if code != ExitFailed || !strings.Contains(errs.String(), "stopped watching") {
				t.Errorf("after its context ended: exit %d, stderr %q", code, errs.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if strings.Count(out.String(), first) != 1 || strings.Count(out.String(), id) != 2 {
				t.Errorf("each Work should print once, and the changed one again:\n%s", out.String())
			}
			if tc.name == "table" {
				if !strings.HasPrefix(lines[0], "ID ") || strings.Count(out.String(), "SCOPE") != 1 {
					t.Errorf("one header, then rows:\n%s", out.String())
				}
				return
			}
			for _, l := range lines {
				var w struct{ ID, State string }
				if err := json.Unmarshal([]byte(l), &w); err != nil || w.ID == "" {
					t.Errorf("not one Work per line: %q", l)
				}
			}
			var last struct{ ID, State string }
			json.Unmarshal([]byte(lines[len(lines)-1]), &last)
			if last.ID != id || last.State != "failed" {
				t.Errorf("the last line should be the Work's newest state: %q", lines[len(lines)-1])
			}
		})
	}
}

// -o wide adds columns to every list that has more to show: runs list
// gets runs table's, artifacts their checksum, toolbelt calls their ids,
// events chain what events list adds.
func TestWideColumnsOfTheOtherLists(t *testing.T) {
	serveStack(t)
	mustRun(t, 0, "work", "create", "--scope", "setup")
	evt := strings.Fields(mustRun(t, 0, "events", "list", "-o", "name"))[0]
	for _, tc := range []struct {
		args []string
		wide []string
	}{
		{[]string{"runs", "list"}, []string{"SCOPE", "EXECUTOR", "TRIGGER TYPE", "USAGE", "OUTCOME"}},
		{[]string{"artifacts", "list"}, []string{"SHA256"}},
		{[]string{"toolbelt", "calls"}, []string{"TOKEN ID"}},
		{[]string{"events", "chain", evt}, []string{"ACTOR", "PARENT"}},
	} {
		plain := strings.SplitN(mustRun(t, 0, tc.args...), "\n", 2)[0]
		wide := strings.SplitN(mustRun(t, 0, append(tc.args, "-o", "wide")...), "\n", 2)[0]
		for _, col := range tc.wide {
			if !strings.Contains(wide, col) || strings.Contains(plain, col) {
				t.Errorf("%v: -o wide header %q, plain %q: want %s only in -o wide", tc.args, wide, plain, col)
			}
		}
		if !strings.HasPrefix(wide, strings.TrimSpace(plain)[:4]) {
			t.Errorf("%v: -o wide should start with the plain columns: %q vs %q", tc.args, wide, plain)
		}
	}
}

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/cliexit"
	"github.com/open-conduit/open-conduit/internal/config"
)

func init() { configSubcommands = append(configSubcommands, newConfigDiffCmd) }

// configDiff is config diff's one JSON shape, whether or not the documents
// differ.
type configDiff struct {
	Identical bool `json:"identical"`
	// Generation and ActiveHash name the active configuration compared
	// against; Hash is FILE's.
	Generation int64        `json:"generation"`
	ActiveHash string       `json:"active_hash"`
	Hash       string       `json:"hash"`
	Changes    []diffChange `json:"changes"`
	Summary    diffSummary  `json:"summary"`
}

// diffChange is one member an apply would add, remove or change.
type diffChange struct {
	// Pointer is the member's JSON pointer, as diagnostics name members.
	Pointer string `json:"pointer"`
	// Kind is scope, binding, route, secret or member (any other).
	Kind string `json:"kind"`
	// Change is added, removed or changed.
	Change string `json:"change"`
}

// diffCounts count the changes of one kind.
type diffCounts struct {
	Added   int `json:"added"`
	Removed int `json:"removed"`
	Changed int `json:"changed"`
}

type diffSummary struct {
	Scopes   diffCounts `json:"scopes"`
	Bindings diffCounts `json:"bindings"`
	Routes   diffCounts `json:"routes"`
	// Other counts every other member (secrets, limits, extensions, a
	// scope's own members are counted as its change).
	Other diffCounts `json:"other"`
}

func newConfigDiffCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "diff FILE",
		Short: "Show what config apply FILE would change in the active configuration",
		Long: `Compare a configuration file with the daemon's active generation, as config
apply FILE would see it: a unified diff of the two normalized documents
(canonical JSON, indented, every secret reference redacted as config get
shows it), then a summary of the scopes, bindings and routes added, removed
and changed. Nothing is applied.

It exits 0 when FILE is the active configuration (and says so), 1 when they
differ, or when FILE is unreadable or invalid (with the problems config
apply would print), and 2 when the command line is wrong. --json prints
{"identical", "generation", "active_hash", "hash", "changes", "summary"}.`,
		Args: oneArg("configuration FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			doc, err := readDocument(path)
			if err != nil {
				return err
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			v, err := c.ValidateConfig(cmd.Context(), doc)
			if err != nil {
				return documentFailure(err, path, t)
			}
			if !v.Valid {
				if !wantJSON(cmd) {
					printValidation(s, v.Diagnostics, nil)
				}
				return cliexit.Coded(ExitFailed, "invalid_config", "%s is not a valid configuration; fix the problems above (check it with: open-conduit config validate %s)", path, path)
			}
			cur, err := c.Config(cmd.Context(), nil)
			if err != nil {
				return clientFailure(err, t)
			}
			mine, ok := config.Normalize(doc)
			if !ok {
				return failf("%s is not a configuration document the daemon read as valid", path)
			}
			d := diffConfigs(cur.Config, mine, cur.Hash != v.Hash)
			d.Generation, d.ActiveHash, d.Hash = cur.Generation, cur.Hash, v.Hash
			if wantJSON(cmd) {
				b, err := json.Marshal(d)
				if err != nil {
					return failf("cannot encode the diff: %v", err)
				}
				if err := printRaw(s.Out, b); err != nil {
					return err
				}
			} else {
				printConfigDiff(s.Out, d, cur.Config, mine, path)
			}
			if !d.Identical {
				return silent(ExitFailed)
			}
			return nil
		},
	}
}

// diffConfigs lists the changes from active to mine (both normalized).
// hashesDiffer is whether the documents' hashes differ: when they do and
// the normalized forms do not, what differs is a secret reference, which
// neither side shows.
func diffConfigs(active, mine []byte, hashesDiffer bool) configDiff {
	d := configDiff{Changes: []diffChange{}}
	var a, b map[string]json.RawMessage
	_ = json.Unmarshal(active, &a)
	_ = json.Unmarshal(mine, &b)
	add := func(ptr, kind, change string) {
		d.Changes = append(d.Changes, diffChange{Pointer: ptr, Kind: kind, Change: change})
		c := &d.Summary.Other
		switch kind {
		case "scope":
			c = &d.Summary.Scopes
		case "binding":
			c = &d.Summary.Bindings
		case "route":
			c = &d.Summary.Routes
		}
		switch change {
		case "added":
			c.Added++
		case "removed":
			c.Removed++
		default:
			c.Changed++
		}
	}
	for _, k := range unionKeys(a, b) {
		switch k {
		case "scopes":
			diffScopes(objectOf(a[k]), objectOf(b[k]), add)
		case "secrets":
			diffMembers("/secrets", "secret", objectOf(a[k]), objectOf(b[k]), add)
		default:
			diffMember("/"+pointerToken(k), "member", a[k], b[k], add)
		}
	}
	if len(d.Changes) == 0 && hashesDiffer {
		add("/secrets", "secret", "changed")
	}
	d.Identical = len(d.Changes) == 0
	return d
}

// diffScopes compares the scopes: a scope added or removed brings its
// bindings and routes with it; a scope in both is changed when anything
// in it is, and its bindings and routes are compared one by one.
func diffScopes(a, b map[string]json.RawMessage, add func(ptr, kind, change string)) {
	for _, id := range unionKeys(a, b) {
		ptr := "/scopes/" + pointerToken(id)
		sa, sb := objectOf(a[id]), objectOf(b[id])
		switch {
		case a[id] == nil:
			add(ptr, "scope", "added")
		case b[id] == nil:
			add(ptr, "scope", "removed")
		case bytes.Equal(a[id], b[id]):
			continue
		default:
			add(ptr, "scope", "changed")
		}
		diffMembers(ptr+"/bindings", "binding", objectOf(sa["bindings"]), objectOf(sb["bindings"]), add)
		ra, rb := routesOf(sa["routes"]), routesOf(sb["routes"])
		for _, k := range unionKeys(ra, rb) {
			diffMember(ptr+"/routes/"+k, "route", ra[k], rb[k], add)
		}
	}
}

// routesOf keys a scope's routes by id, or by their place when they have
// none ("#0", "#1"…); the pointer of a keyed route is its id.
func routesOf(raw json.RawMessage) map[string]json.RawMessage {
	var list []json.RawMessage
	_ = json.Unmarshal(raw, &list)
	out := map[string]json.RawMessage{}
	for i, r := range list {
		var head struct {
			ID string `json:"id"`
		}
		key := strconv.Itoa(i)
		if json.Unmarshal(r, &head) == nil && head.ID != "" {
			key = pointerToken(head.ID)
		}
		out[key] = r
	}
	return out
}

func diffMembers(base, kind string, a, b map[string]json.RawMessage, add func(ptr, kind, change string)) {
	for _, k := range unionKeys(a, b) {
		diffMember(base+"/"+pointerToken(k), kind, a[k], b[k], add)
	}
}

func diffMember(ptr, kind string, a, b json.RawMessage, add func(ptr, kind, change string)) {
	switch {
	case a == nil && b == nil:
	case a == nil:
		add(ptr, kind, "added")
	case b == nil:
		add(ptr, kind, "removed")
	case !bytes.Equal(a, b):
		add(ptr, kind, "changed")
	}
}

func objectOf(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	return m
}

func unionKeys(a, b map[string]json.RawMessage) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// printConfigDiff prints the unified diff and the summary, or that the
// file is the active configuration.
func printConfigDiff(w io.Writer, d configDiff, active, mine []byte, path string) {
	if d.Identical {
		fmt.Fprintf(w, "Identical: %s is the active configuration (generation %d, hash %s); config apply would change nothing.\n", path, d.Generation, d.Hash)
		return
	}
	lines := func(doc []byte) []string {
		return strings.Split(strings.TrimSuffix(string(prettyJSON(doc)), "\n"), "\n")
	}
	fmt.Fprintf(w, "--- active (generation %d)\n+++ %s\n", d.Generation, path)
	writeUnified(w, diffLines(lines(active), lines(mine)), 3)
	for _, c := range d.Changes {
		if c.Kind == "secret" && c.Pointer == "/secrets" {
			fmt.Fprintln(w, "(secret references differ; they are compared, never shown)")
		}
	}
	sm := d.Summary
	count := func(name string, c diffCounts) string {
		return fmt.Sprintf("%s %d added, %d removed, %d changed", name, c.Added, c.Removed, c.Changed)
	}
	fmt.Fprintf(w, "%s; %s; %s; %s\n", count("scopes:", sm.Scopes), count("bindings:", sm.Bindings), count("routes:", sm.Routes), count("other members:", sm.Other))
}

// edit is one line of a line diff: ' ' kept, '-' removed, '+' added.
type edit struct {
	op   byte
	text string
}

// maxEditDistance bounds the search of diffLines: past it the differing
// middle is shown removed then added whole, which is still a correct diff.
const maxEditDistance = 2000

// diffLines is a shortest line diff of a and b (Myers' greedy algorithm),
// after their common first and last lines are set aside.
func diffLines(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []edit
	for _, l := range a[:pre] {
		out = append(out, edit{' ', l})
	}
	out = append(out, myers(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		out = append(out, edit{' ', l})
	}
	return out
}

func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	if n == 0 && m == 0 {
		return nil
	}
	limit := min(n+m, maxEditDistance)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int
	for d := 0; d <= limit; d++ {
		trace = append(trace, slices.Clone(v))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(a, b, trace, off)
			}
		}
	}
	var out []edit
	for _, l := range a {
		out = append(out, edit{'-', l})
	}
	for _, l := range b {
		out = append(out, edit{'+', l})
	}
	return out
}

// backtrack walks the rounds of myers back from the end of both.
func backtrack(a, b []string, trace [][]int, off int) []edit {
	var rev []edit
	x, y := len(a), len(b)
	for d := len(trace) - 1; d >= 0; d-- {
		v := trace[d]
		k := x - y
		var prevK int
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := v[off+prevK]
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			rev = append(rev, edit{' ', a[x-1]})
			x, y = x-1, y-1
		}
		if d > 0 {
			if x == prevX {
				rev = append(rev, edit{'+', b[y-1]})
			} else {
				rev = append(rev, edit{'-', a[x-1]})
			}
		}
		x, y = prevX, prevY
	}
	slices.Reverse(rev)
	return rev
}

// writeUnified prints edits as unified hunks with ctx lines of context.
func writeUnified(w io.Writer, edits []edit, ctx int) {
	// Where each edit is in a and in b (1-based line numbers).
	type at struct{ a, b int }
	pos := make([]at, len(edits))
	la, lb := 1, 1
	for i, e := range edits {
		pos[i] = at{la, lb}
		if e.op != '+' {
			la++
		}
		if e.op != '-' {
			lb++
		}
	}
	for i := 0; i < len(edits); {
		if edits[i].op == ' ' {
			i++
			continue
		}
		start := max(i-ctx, 0)
		end := i
		// Extend the hunk while the next change is within 2*ctx lines.
		for j := i; j < len(edits); j++ {
			if edits[j].op != ' ' {
				end = j
			} else if j-end > 2*ctx {
				break
			}
		}
		stop := min(end+ctx+1, len(edits))
		na, nb := 0, 0
		for _, e := range edits[start:stop] {
			if e.op != '+' {
				na++
			}
			if e.op != '-' {
				nb++
			}
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(pos[start].a, na), hunkRange(pos[start].b, nb))
		for _, e := range edits[start:stop] {
			fmt.Fprintf(w, "%c%s\n", e.op, e.text)
		}
		i = stop
	}
}

// hunkRange is a unified hunk's start,count; an empty side names the line
// before it, as diff -u does.
func hunkRange(start, n int) string {
	if n == 0 {
		start--
	}
	if n == 1 {
		return strconv.Itoa(start)
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(n)
}

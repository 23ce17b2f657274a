package cliexit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/cobra"
)

// errTyped stands for a client's typed error that a program words itself.
type errTyped struct{ code string }

func (e *errTyped) Error() string { return "typed " + e.code }

// tree is a program "prog" whose command "do" returns ret, and "two" that
// takes exactly two arguments (cobra checks it).
func tree(ret error) *cobra.Command {
	root := &cobra.Command{Use: "prog"}
	do := &cobra.Command{Use: "do", RunE: func(*cobra.Command, []string) error { return ret }}
	do.Flags().Int("n", 0, "a number")
	two := &cobra.Command{Use: "two A B", Args: cobra.ExactArgs(2), RunE: func(*cobra.Command, []string) error { return nil }}
	root.AddCommand(do, two)
	return root
}

func TestRun(t *testing.T) {
	describe := func(err error) (string, bool) {
		var te *errTyped
		if errors.As(err, &te) {
			return "described " + te.code, true
		}
		return "", false
	}
	cases := []struct {
		name     string
		ret      error
		args     []string
		describe func(error) (string, bool)
		code     int
		stderr   string
	}{
		{"ok", nil, []string{"do"}, nil, OK, ""},
		{"failed", Failf("no %s", "luck"), []string{"do"}, nil, Failed, "prog: no luck\n"},
		{"usage", Usagef("--n must be %d or more", 1), []string{"do"}, nil, Usage, "prog: --n must be 1 or more\n"},
		{"silent", Silent(Failed), []string{"do"}, nil, Failed, ""},
		{"wrapped keeps its code", fmt.Errorf("context: %w", Usagef("bad")), []string{"do"}, nil, Usage, "prog: bad\n"},
		{"described", &errTyped{"x"}, []string{"do"}, describe, Failed, "prog: described x\n"},
		{"not described", errors.New("plain"), []string{"do"}, describe, Usage, "prog: plain\nRun 'prog --help' for usage.\n"},
		{"no describe", &errTyped{"x"}, []string{"do"}, nil, Usage, "prog: typed x\nRun 'prog --help' for usage.\n"},
		{"ours before describe", Failf("ours"), []string{"do"}, func(error) (string, bool) { return "theirs", true }, Failed, "prog: ours\n"},
		{"bad flag", nil, []string{"do", "--n", "x"}, nil, Usage, "prog: invalid argument \"x\" for \"--n\" flag: strconv.ParseInt: parsing \"x\": invalid syntax (see 'prog do --help')\n"},
		{"unknown flag", nil, []string{"do", "--m"}, nil, Usage, "prog: unknown flag: --m (see 'prog do --help')\n"},
		{"unknown command", nil, []string{"nope"}, nil, Usage, "prog: unknown command \"nope\" for \"prog\"\nRun 'prog --help' for usage.\n"},
		{"argument count", nil, []string{"two", "a"}, nil, Usage, "prog: accepts 2 arg(s), received 1\nRun 'prog --help' for usage.\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, stderr bytes.Buffer
			root := tree(tc.ret)
			root.SetOut(&out)
			root.SetErr(&out)
			code := Run(context.Background(), root, tc.args, &stderr, tc.describe)
			if code != tc.code || stderr.String() != tc.stderr {
				t.Errorf("Run(%v) = %d, stderr %q; want %d, %q", tc.args, code, stderr.String(), tc.code, tc.stderr)
			}
			if out.Len() != 0 {
				t.Errorf("cobra printed %q itself", out.String())
			}
		})
	}
}

// With JSON, every failure is the envelope on one line, with the exit
// code it has without.
func TestRunWithJSON(t *testing.T) {
	cases := []struct {
		ret    error
		args   []string
		code   int
		stderr string
	}{
		{Coded(Usage, "invalid_request", "invalid_request: limit must be 1 to 500"), []string{"do"}, Usage, `{"error":{"code":"invalid_request","message":"limit must be 1 to 500"}}` + "\n"},
		{Failf("no luck"), []string{"do"}, Failed, `{"error":{"code":"failed","message":"no luck"}}` + "\n"},
		{Usagef("bad"), []string{"do"}, Usage, `{"error":{"code":"usage","message":"bad"}}` + "\n"},
		{Silent(Failed), []string{"do"}, Failed, ""},
		{nil, []string{"two", "a"}, Usage, `{"error":{"code":"usage","message":"accepts 2 arg(s), received 1 (see 'prog two --help')"}}` + "\n"},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		root := tree(tc.ret)
		code := RunWith(context.Background(), root, tc.args, &stderr, RunOptions{JSON: func(*cobra.Command) bool { return true }})
		if code != tc.code || stderr.String() != tc.stderr {
			t.Errorf("RunWith(%v) = %d, %q; want %d, %q", tc.args, code, stderr.String(), tc.code, tc.stderr)
		}
		if CodeOf(tc.ret) == "" && tc.ret != nil && tc.stderr != "" {
			t.Errorf("%v has no code", tc.ret)
		}
	}
}

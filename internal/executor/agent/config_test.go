package agent

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var testSpec = Spec{Executor: "test-agent", Binary: "agent", Secrets: map[string]string{"api_key": "AGENT_API_KEY"}}

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig(testSpec, []byte(`{"model": "m-1", "prompt": "hello {{len .Events}}"}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Binary != "agent" || cfg.Model != "m-1" || cfg.MaxTurns != DefaultTurns || cfg.Timeout != DefaultTimeout {
		t.Fatalf("defaults: %+v", cfg)
	}
	if cfg.Tools == nil || len(cfg.Tools) != 0 {
		t.Fatalf("tools default to none, got %#v", cfg.Tools)
	}
	if cfg.Secrets["api_key"] != "AGENT_API_KEY" || cfg.Workdir != (Workdir{}) || cfg.Template == nil || cfg.Playbook != "" {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestParseConfigFull(t *testing.T) {
	cfg, err := ParseConfig(testSpec, []byte(`{
		"binary": "/opt/agent/bin/agent", "model": "vendor/model-2@latest", "playbook": "answer-issue",
		"prompt": "{{range .Events}}{{.Type}}{{end}}", "tools": ["Read", "Bash(git log:*)"],
		"max_turns": 7, "timeout": "15m",
		"workdir": {"git": {"repository": "https://example.org/r.git", "ref": "release/1.2"}},
		"secrets": {"api_key": "MODEL_KEY"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Workdir{Repository: "https://example.org/r.git", Ref: "release/1.2"}
	if cfg.Binary != "/opt/agent/bin/agent" || cfg.Playbook != "answer-issue" || cfg.MaxTurns != 7 ||
		cfg.Timeout != 15*time.Minute || cfg.Workdir != want || cfg.Secrets["api_key"] != "MODEL_KEY" ||
		strings.Join(cfg.Tools, ",") != "Read,Bash(git log:*)" {
		t.Fatalf("parsed: %+v", cfg)
	}
	cfg, err = ParseConfig(testSpec, []byte(`{"model": "m", "prompt": "p", "workdir": "/srv/repo/"}`))
	if err != nil || cfg.Workdir.Dir != "/srv/repo" {
		t.Fatalf("dir workdir: %+v %v", cfg.Workdir, err)
	}
}

func TestParseConfigProblems(t *testing.T) {
	const secret = "s3cr3t-value"
	cases := []struct {
		name, raw string
		want      []string // "pointer code"
	}{
		{"not json", `{`, []string{" invalid_json"}},
		{"not an object", `[]`, []string{" wrong_type"}},
		{"empty", ``, []string{"/model missing_field", "/prompt missing_field"}},
		{"unknown and duplicate", `{"model": "m", "prompt": "p", "model": "n", "colour": 1}`, []string{"/model duplicate_key", "/colour unknown_field"}},
		{"null", `{"model": null, "prompt": "p"}`, []string{"/model null_value"}},
		{"types", `{"model": 1, "prompt": [], "tools": "Read", "max_turns": "5", "timeout": 5, "workdir": 1, "secrets": []}`,
			[]string{"/model wrong_type", "/prompt wrong_type", "/tools wrong_type", "/max_turns wrong_type", "/timeout wrong_type", "/workdir wrong_type", "/secrets wrong_type"}},
		{"model", `{"model": "-` + secret + `", "prompt": "p"}`, []string{"/model invalid_value"}},
		{"binary relative path", `{"binary": "bin/` + secret + `", "model": "m", "prompt": "p"}`, []string{"/binary invalid_value"}},
		{"binary option", `{"binary": "-` + secret + `", "model": "m", "prompt": "p"}`, []string{"/binary invalid_value"}},
		{"playbook", `{"playbook": "Bad ` + secret + `", "model": "m", "prompt": "p"}`, []string{"/playbook invalid_value"}},
		{"template", `{"model": "m", "prompt": "a\n{{.Events ` + secret + `"}`, []string{"/prompt invalid_value"}},
		{"template blank", `{"model": "m", "prompt": "  "}`, []string{"/prompt invalid_value"}},
		{"template large", `{"model": "m", "prompt": "` + strings.Repeat("x", MaxPromptBytes+1) + `"}`, []string{"/prompt too_large"}},
		{"tools", `{"model": "m", "prompt": "p", "tools": ["Read", "Read", "mcp__os__emit", "a,b", 3, ""]}`,
			[]string{"/tools/1 duplicate_key", "/tools/2 invalid_value", "/tools/3 invalid_value", "/tools/4 wrong_type", "/tools/5 invalid_value"}},
		{"turns", `{"model": "m", "prompt": "p", "max_turns": 0}`, []string{"/max_turns invalid_value"}},
		{"turns high", `{"model": "m", "prompt": "p", "max_turns": 501}`, []string{"/max_turns invalid_value"}},
		{"turns fraction", `{"model": "m", "prompt": "p", "max_turns": 2.5}`, []string{"/max_turns invalid_value"}},
		{"timeout", `{"model": "m", "prompt": "p", "timeout": "1s"}`, []string{"/timeout invalid_value"}},
		{"timeout high", `{"model": "m", "prompt": "p", "timeout": "25h"}`, []string{"/timeout invalid_value"}},
		{"workdir relative", `{"model": "m", "prompt": "p", "workdir": "` + secret + `"}`, []string{"/workdir invalid_value"}},
		{"workdir empty object", `{"model": "m", "prompt": "p", "workdir": {}}`, []string{"/workdir/git missing_field"}},
		{"workdir unknown", `{"model": "m", "prompt": "p", "workdir": {"svn": 1, "git": {"repository": "/r"}}}`, []string{"/workdir/svn unknown_field"}},
		{"git members", `{"model": "m", "prompt": "p", "workdir": {"git": {"ref": "a..b", "depth": 1}}}`,
			[]string{"/workdir/git/ref invalid_value", "/workdir/git/depth unknown_field", "/workdir/git/repository missing_field"}},
		{"git password", `{"model": "m", "prompt": "p", "workdir": {"git": {"repository": "https://u:` + secret + `@example.org/r"}}}`,
			[]string{"/workdir/git/repository invalid_value"}},
		{"git scheme", `{"model": "m", "prompt": "p", "workdir": {"git": {"repository": "ext::sh -c ` + secret + `"}}}`,
			[]string{"/workdir/git/repository invalid_value"}},
		{"secrets", `{"model": "m", "prompt": "p", "secrets": {"api_key": "lower", "token": "X", "a/b": "Y"}}`,
			[]string{"/secrets/api_key invalid_value", "/secrets/token unknown_field", "/secrets/a~1b unknown_field"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig(testSpec, []byte(c.raw))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a *ConfigError, got %v", err)
			}
			var got []string
			for _, p := range ce.Problems {
				got = append(got, p.Pointer+" "+p.Code)
				if p.Remedy == "" {
					t.Errorf("%s: empty remedy", p.Pointer)
				}
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("problems\n got %q\nwant %q", got, c.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error quotes a configured value: %v", err)
			}
		})
	}
}

func TestValidRefAndRepository(t *testing.T) {
	for _, ok := range []string{"main", "v1.2.3", "feature/x", "0123abcd"} {
		if !validRef(ok) {
			t.Errorf("%q should be valid", ok)
		}
	}
	for _, bad := range []string{"", "-x", "a b", "a..b", "x.lock", "a/", "@", "a@{1}", "a~1", "a:b"} {
		if validRef(bad) {
			t.Errorf("%q should be refused", bad)
		}
	}
	for _, ok := range []string{"/srv/r.git", "git@example.org:o/r.git", "ssh://git@example.org/r", "file:///srv/r", "https://example.org/r"} {
		if rem := checkRepository(ok); rem != "" {
			t.Errorf("%q refused: %s", ok, rem)
		}
	}
	for _, bad := range []string{"", "relative/path", "-uhttps://x", "ftp://x/r", "https://a:b@x/r", "x\n:y"} {
		if checkRepository(bad) == "" {
			t.Errorf("%q should be refused", bad)
		}
	}
}

func TestParseConfigBaseURL(t *testing.T) {
	for _, good := range []string{"http://127.0.0.1:8080", "https://models.example.org/v1", "http://[::1]:9/api/"} {
		cfg, err := ParseConfig(testSpec, []byte(`{"model": "m", "prompt": "p", "base_url": "`+good+`"}`))
		if err != nil || cfg.BaseURL != good {
			t.Errorf("base_url %q: %+v, %v", good, cfg.BaseURL, err)
		}
	}
	const secret = "s3cr3t"
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://h/x", "http://", "https://u:" + secret + "@h/", "https://u@h/",
		"https://h/?key=" + secret, "https://h/#" + secret, "https://h/?", "http://h/ x", "mailto:" + secret} {
		_, err := ParseConfig(testSpec, []byte(`{"model": "m", "prompt": "p", "base_url": "`+bad+`"}`))
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Pointer != "/base_url" || ce.Problems[0].Code != CodeInvalidValue {
			t.Errorf("base_url %q: %v, want one invalid_value at /base_url", bad, err)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the problem of %q quotes the value: %v", bad, err)
		}
	}
}

func TestSpecCheckTool(t *testing.T) {
	spec := testSpec
	spec.CheckTool = func(name string) string {
		if name == "shell" {
			return ""
		}
		return "name a tool the agent knows"
	}
	if _, err := ParseConfig(spec, []byte(`{"model": "m", "prompt": "p", "tools": ["shell"]}`)); err != nil {
		t.Errorf("a known tool: %v", err)
	}
	_, err := ParseConfig(spec, []byte(`{"model": "m", "prompt": "p", "tools": ["shell", "Read"]}`))
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Pointer != "/tools/1" {
		t.Errorf("an unknown tool: %v", err)
	}
}

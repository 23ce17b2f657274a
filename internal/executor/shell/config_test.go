package shell

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

func TestParseConfigValid(t *testing.T) {
	cfg, err := ParseConfig(json.RawMessage(`{"command": ["sh", "-c", "./run.sh"], "env": {"LOG_LEVEL": "debug", "http_proxy": ""}, "dir": "repo/sub"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Command: []string{"sh", "-c", "./run.sh"},
		Env:     map[string]string{"LOG_LEVEL": "debug", "http_proxy": ""},
		Dir:     "repo/sub",
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config = %+v, want %+v", cfg, want)
	}
	if _, err := ParseConfig(json.RawMessage(`{"command": ["/bin/true"], "dir": "/srv/app"}`)); err != nil {
		t.Errorf("absolute dir refused: %v", err)
	}
}

func TestParseConfigProblems(t *testing.T) {
	tests := []struct {
		name, raw string
		want      []Problem // Remedy not compared
	}{
		{"missing command", `{}`, []Problem{{Pointer: "/command", Code: CodeMissingField}}},
		{"empty config", ``, []Problem{{Pointer: "/command", Code: CodeMissingField}}},
		{"empty command", `{"command": []}`, []Problem{{Pointer: "/command", Code: CodeInvalidValue}}},
		{"null command", `{"command": null}`, []Problem{{Pointer: "/command", Code: CodeNullValue}}},
		{"command a string", `{"command": "sh -c x"}`, []Problem{{Pointer: "/command", Code: CodeWrongType}}},
		{"argument a number", `{"command": ["sh", 1]}`, []Problem{{Pointer: "/command/1", Code: CodeWrongType}}},
		{"argument null", `{"command": ["sh", null]}`, []Problem{{Pointer: "/command/1", Code: CodeNullValue}}},
		{"empty program", `{"command": [""]}`, []Problem{{Pointer: "/command/0", Code: CodeInvalidValue}}},
		{"NUL in argument", `{"command": ["sh", "a\u0000b"]}`, []Problem{{Pointer: "/command/1", Code: CodeInvalidValue}}},
		{"duplicate member", `{"command": ["a"], "command": ["b"]}`, []Problem{{Pointer: "/command", Code: CodeDuplicateKey}}},
		{"unknown member", `{"command": ["a"], "args": []}`, []Problem{{Pointer: "/args", Code: CodeUnknownField}}},
		{"env null", `{"command": ["a"], "env": null}`, []Problem{{Pointer: "/env", Code: CodeNullValue}}},
		{"env an array", `{"command": ["a"], "env": ["A=b"]}`, []Problem{{Pointer: "/env", Code: CodeWrongType}}},
		{"env value a number", `{"command": ["a"], "env": {"A": 1}}`, []Problem{{Pointer: "/env/A", Code: CodeWrongType}}},
		{"env value null", `{"command": ["a"], "env": {"A": null}}`, []Problem{{Pointer: "/env/A", Code: CodeNullValue}}},
		{"env duplicate", `{"command": ["a"], "env": {"A": "x", "A": "y"}}`, []Problem{{Pointer: "/env/A", Code: CodeDuplicateKey}}},
		{"env bad name", `{"command": ["a"], "env": {"1A": "x"}}`, []Problem{{Pointer: "/env/1A", Code: CodeInvalidValue}}},
		{"env name escaped in pointer", `{"command": ["a"], "env": {"a/b~c": "x"}}`, []Problem{{Pointer: "/env/a~1b~0c", Code: CodeInvalidValue}}},
		{"env OS_TOKEN_FILE", `{"command": ["a"], "env": {"OS_TOKEN_FILE": "x"}}`, []Problem{{Pointer: "/env/OS_TOKEN_FILE", Code: CodeInvalidValue}}},
		{"env OS_ENDPOINT", `{"command": ["a"], "env": {"OS_ENDPOINT": "x"}}`, []Problem{{Pointer: "/env/OS_ENDPOINT", Code: CodeInvalidValue}}},
		{"env OPEN_CONDUIT_", `{"command": ["a"], "env": {"OPEN_CONDUIT_WORK_ID": "x"}}`, []Problem{{Pointer: "/env/OPEN_CONDUIT_WORK_ID", Code: CodeInvalidValue}}},
		{"env NUL in value", `{"command": ["a"], "env": {"A": "x\u0000"}}`, []Problem{{Pointer: "/env/A", Code: CodeInvalidValue}}},
		{"dir escapes", `{"command": ["a"], "dir": "../elsewhere"}`, []Problem{{Pointer: "/dir", Code: CodeInvalidValue}}},
		{"dir empty", `{"command": ["a"], "dir": ""}`, []Problem{{Pointer: "/dir", Code: CodeInvalidValue}}},
		{"dir a number", `{"command": ["a"], "dir": 5}`, []Problem{{Pointer: "/dir", Code: CodeWrongType}}},
		{"dir null", `{"command": ["a"], "dir": null}`, []Problem{{Pointer: "/dir", Code: CodeNullValue}}},
		{"not an object", `["a"]`, []Problem{{Pointer: "", Code: CodeWrongType}}},
		{"null", `null`, []Problem{{Pointer: "", Code: CodeNullValue}}},
		{"syntax", `{"command": [`, []Problem{{Pointer: "", Code: CodeInvalidJSON}}},
		{"trailing data", `{"command": ["a"]} {}`, []Problem{{Pointer: "", Code: CodeInvalidJSON}}},
		{"invalid UTF-8", "{\"command\": [\"\xff\"]}", []Problem{{Pointer: "", Code: CodeInvalidJSON}}},
		{
			"every problem at once, in document order",
			`{"command": [], "extra": 1, "env": {"OS_ENDPOINT": "x", "B": 2}, "dir": "../x", "extra": 2}`,
			[]Problem{
				{Pointer: "/command", Code: CodeInvalidValue},
				{Pointer: "/extra", Code: CodeUnknownField},
				{Pointer: "/env/OS_ENDPOINT", Code: CodeInvalidValue},
				{Pointer: "/env/B", Code: CodeWrongType},
				{Pointer: "/dir", Code: CodeInvalidValue},
				{Pointer: "/extra", Code: CodeDuplicateKey},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateConfig(json.RawMessage(tt.raw))
			var cerr *ConfigError
			if !errors.As(err, &cerr) {
				t.Fatalf("error = %v, want a *ConfigError", err)
			}
			var got []Problem
			for _, p := range cerr.Problems {
				if p.Remedy == "" {
					t.Errorf("%s %s has no remedy", p.Pointer, p.Code)
				}
				got = append(got, Problem{Pointer: p.Pointer, Code: p.Code})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestConfigErrorsNeverEchoValues(t *testing.T) {
	const canary = "CANARYvalue"
	raw := `{"command": ["", "` + canary + "\\u0000" + `"], "env": {"OS_ENDPOINT": "` + canary + `", "X": "` + canary + `\u0000"}, "dir": "../` + canary + `", "` + canary + `": "` + canary + `"}`
	err := ValidateConfig(json.RawMessage(raw))
	var cerr *ConfigError
	if !errors.As(err, &cerr) || len(cerr.Problems) != 6 {
		t.Fatalf("error = %v, want six problems", err)
	}
	// The unknown member's name is the pointer; no value appears anywhere.
	msg := strings.ReplaceAll(err.Error(), "/"+canary+":", "")
	if strings.Contains(msg, canary) {
		t.Errorf("an error echoes a configured value: %s", err)
	}
}

// FuzzParseConfig: ParseConfig never panics, and whatever it accepts a
// strict decoder (unknown and duplicate members refused) accepts as well,
// with the same meaning.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{"command": ["sh", "-c", "x"], "env": {"A": "b"}, "dir": "d"}`,
		`{"command": ["/bin/true"], "dir": "/abs"}`,
		`{"command": []}`, `{"command": null}`, `{"command": ["a"], "command": ["b"]}`,
		`{"command": ["a"], "env": {"A": "x", "A": "y"}}`, `{"x": 1}`, `[]`, `null`, `{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := ParseConfig(raw)
		if err != nil {
			var cerr *ConfigError
			if !errors.As(err, &cerr) || len(cerr.Problems) == 0 {
				t.Fatalf("error %v is not a ConfigError with problems", err)
			}
			return
		}
		var strict struct {
			Command []string          `json:"command"`
			Env     map[string]string `json:"env"`
			Dir     string            `json:"dir"`
		}
		if len(raw) == 0 {
			raw = []byte("{}")
		}
		if err := jsonv2.Unmarshal(raw, &strict, jsonv2.RejectUnknownMembers(true), jsonv2.MatchCaseInsensitiveNames(false)); err != nil {
			t.Fatalf("accepted %q, which a strict decoder refuses: %v", raw, err)
		}
		if !reflect.DeepEqual(strict.Command, cfg.Command) || strict.Dir != cfg.Dir || len(strict.Env) != len(cfg.Env) {
			t.Fatalf("accepted %q as %+v, the strict decoder read %+v", raw, cfg, strict)
		}
		if len(cfg.Command) == 0 || cfg.Command[0] == "" {
			t.Fatalf("accepted %q without a program", raw)
		}
	})
}

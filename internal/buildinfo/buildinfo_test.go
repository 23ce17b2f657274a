package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	for name, c := range map[string]struct {
		bi   *debug.BuildInfo
		ok   bool
		want Info
	}{
		"no build information": {nil, false, Info{Version: "(devel)"}},
		"a work tree build": {&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			true, Info{Version: "(devel)", Commit: "abc123", Modified: true, Go: "go1.26.8"}},
		"an installed module": {&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}},
			true, Info{Version: "v0.3.0", Go: "go1.26.8"}},
		"an empty main version": {&debug.BuildInfo{GoVersion: "go1.26.8"}, true, Info{Version: "(devel)", Go: "go1.26.8"}},
	} {
		if got := from(c.bi, c.ok); got != c.want {
			t.Errorf("%s: from = %+v, want %+v", name, got, c.want)
		}
	}
	if Read().Version == "" || Read() != Read() {
		t.Errorf("Read = %+v", Read())
	}
}

package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/daemon"
)

// fakeDaemon replaces the daemon with one that records its options.
func fakeDaemon(t *testing.T, err error) *daemon.Options {
	t.Helper()
	got := &daemon.Options{}
	prev := runDaemon
	t.Cleanup(func() { runDaemon = prev })
	runDaemon = func(_ context.Context, o daemon.Options) error {
		*got = o
		return err
	}
	return got
}

func TestDaemonStateDirectory(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"flag", map[string]string{EnvState: "/env"}, []string{"--state", "/flag"}, "/flag"},
		{"env", map[string]string{EnvState: "/env", "XDG_STATE_HOME": "/x"}, nil, "/env"},
		{"xdg", map[string]string{"XDG_STATE_HOME": "/x"}, nil, "/x/open-conduit"},
		{"home", map[string]string{"HOME": "/home/u"}, nil, "/home/u/.local/state/open-conduit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{EnvState, "XDG_STATE_HOME", "HOME"} {
				t.Setenv(k, tc.env[k])
			}
			got := fakeDaemon(t, nil)
			if code, _, stderr := run(t, append([]string{"daemon"}, tc.args...)...); code != ExitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got.StateDir != tc.want || got.LogFormat != daemon.LogText {
				t.Errorf("daemon got state %q, log format %q; want %q, text", got.StateDir, got.LogFormat, tc.want)
			}
		})
	}
}

func TestDaemonLogFormat(t *testing.T) {
	got := fakeDaemon(t, nil)
	if code, _, stderr := run(t, "daemon", "--state", "/s", "--log-format", "json"); code != ExitOK || got.LogFormat != daemon.LogJSON {
		t.Fatalf("exit %d (%s), log format %q; want json", code, stderr, got.LogFormat)
	}
	if code, _, stderr := run(t, "daemon", "--state", "/s", "--log-format", "xml"); code != ExitUsage || !strings.Contains(stderr, "text or json") {
		t.Fatalf("--log-format xml: exit %d, %q; want a usage error", code, stderr)
	}
}

func TestDaemonFailureExitsOne(t *testing.T) {
	fakeDaemon(t, errors.New("the state directory is in use: process 7 holds the lock"))
	code, _, stderr := run(t, "daemon", "--state", "/s")
	if code != ExitFailed || !strings.Contains(stderr, "process 7 holds the lock") {
		t.Fatalf("exit %d, %q; want 1 naming the holder", code, stderr)
	}
}

// The real daemon refuses a state directory other users can reach.
func TestDaemonRefusesAnUnsafeStateDirectory(t *testing.T) {
	dir, err := os.MkdirTemp("", "ocd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	state := filepath.Join(dir, "s")
	if err := os.Mkdir(state, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "daemon", "--state", state)
	if code != ExitFailed || !strings.Contains(stderr, state) || !strings.Contains(stderr, "chmod 700") {
		t.Fatalf("exit %d, %q; want 1 naming the path and the fix", code, stderr)
	}
}

func TestDaemonLogLevelAndMetricsFlags(t *testing.T) {
	got := fakeDaemon(t, nil)
	t.Setenv(EnvNotifySocket, "/run/user/1/notify")
	code, _, stderr := run(t, "daemon", "--state", "/s")
	if code != ExitOK || got.LogLevel != daemon.LogInfo || got.MetricsAddress != "" || got.MetricsAllowRemote {
		t.Fatalf("exit %d (%s), options %+v; want info and no metrics listener by default", code, stderr, got)
	}
	// The socket goes to the daemon, and not to what it starts.
	if got.NotifySocket != "/run/user/1/notify" || os.Getenv(EnvNotifySocket) != "" {
		t.Fatalf("notify socket %q, environment %q; want it handed over and unset", got.NotifySocket, os.Getenv(EnvNotifySocket))
	}
	code, _, stderr = run(t, "daemon", "--state", "/s", "--log-level", "debug", "--metrics-address", "127.0.0.1:9464", "--metrics-allow-remote")
	if code != ExitOK || got.LogLevel != daemon.LogDebug || got.MetricsAddress != "127.0.0.1:9464" || !got.MetricsAllowRemote {
		t.Fatalf("exit %d (%s), options %+v", code, stderr, got)
	}
	for _, bad := range []string{"verbose", ""} {
		if code, _, stderr := run(t, "daemon", "--state", "/s", "--log-level", bad); code != ExitUsage || !strings.Contains(stderr, "debug, info, warn or error") {
			t.Fatalf("--log-level %q: exit %d, %q; want a usage error", bad, code, stderr)
		}
	}
}

func TestDaemonStoreFlags(t *testing.T) {
	got := fakeDaemon(t, nil)
	if code, _, stderr := run(t, "daemon", "--state", "/s"); code != ExitOK || got.Store != "" || got.StorePassword != "" {
		t.Fatalf("exit %d (%s), options %+v; want SQLite (no store) by default", code, stderr, got)
	}
	t.Setenv(EnvStore, "postgres://oc@db/oc")
	t.Setenv(EnvStorePassword, "env:PGPASS_OC")
	if code, _, stderr := run(t, "daemon", "--state", "/s"); code != ExitOK || got.Store != "postgres://oc@db/oc" || got.StorePassword != "env:PGPASS_OC" {
		t.Fatalf("exit %d (%s), options %+v; want the store from the environment", code, stderr, got)
	}
	// Handed to the daemon, and not to what it starts.
	if os.Getenv(EnvStore) != "" || os.Getenv(EnvStorePassword) != "" {
		t.Fatalf("the store's variables are still set: %q, %q", os.Getenv(EnvStore), os.Getenv(EnvStorePassword))
	}
	t.Setenv(EnvStore, "postgres://oc@db/other")
	code, _, stderr := run(t, "daemon", "--state", "/s", "--store", "postgres://oc@db2/oc", "--store-password", "keyring:oc-db")
	if code != ExitOK || got.Store != "postgres://oc@db2/oc" || got.StorePassword != "keyring:oc-db" {
		t.Fatalf("exit %d (%s), options %+v; want the flags over the environment", code, stderr, got)
	}
}

// The hidden --cpu-profile writes a CPU profile of the daemon's run, and
// refuses a file that is already there.
func TestDaemonCPUProfile(t *testing.T) {
	fakeDaemon(t, nil)
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	if code, _, stderr := run(t, "daemon", "--state", "/s", "--cpu-profile", path); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the profile: %v, %v; want a non-empty owner-only file", fi, err)
	}
	if code, _, stderr := run(t, "daemon", "--state", "/s", "--cpu-profile", path); code != ExitFailed || !strings.Contains(stderr, "--cpu-profile") {
		t.Fatalf("an existing profile file: exit %d, %q; want 1 naming the flag", code, stderr)
	}
	if code, stdout, _ := run(t, "daemon", "--help"); code != ExitOK || strings.Contains(stdout, "cpu-profile") {
		t.Fatalf("daemon --help shows the hidden flag: %q", stdout)
	}
}

// Package mgmttest starts the management server for tests: on a real
// Unix socket in a fresh, short, owner-only state directory, under the
// directory's lock, with the owner's token bootstrapped into its real
// token file. It also holds small in-memory backends that keep the rules
// of the real ones, and StartStack, the server with every resource route
// on a real SQLite store, runtime and config service.
//
// It must never be imported by production code.
package mgmttest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/unixsock"
)

// Epoch is the default fake clock's start.
var Epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Options are the backends and settings of a test server. Zero fields get
// fresh in-memory backends, a fake clock at Epoch, the system's entropy, a
// discarding logger and health generation 1.
type Options struct {
	// StateDir reuses a state directory (to restart a server on it);
	// empty makes a fresh one that is removed when the test ends.
	StateDir        string
	Credentials     management.Credentials
	Idempotency     management.IdempotencyStore
	ExecutionTokens management.ExecutionTokens
	Health          management.Health
	Ready           func() bool
	Clock           *clock.Fake
	Entropy         clock.Entropy
	CursorKey       []byte
	Version         string
	Logger          *slog.Logger
	Routes          []management.Route
	Authenticated   func(context.Context, management.Principal) context.Context
	// Limits bound the socket's connections and body read time (zero
	// fields take the management socket's).
	Limits unixsock.Limits
	// Metrics and Refused are passed on (see management.Options).
	Metrics http.Handler
	Refused func(socket, code string)
}

// Harness is a running test server.
type Harness struct {
	StateDir  string
	Socket    string
	TokenFile string // the owner's

	Server          *management.Server
	Lock            *statedir.Lock
	Credentials     management.Credentials
	Idempotency     management.IdempotencyStore
	ExecutionTokens management.ExecutionTokens
	Clock           *clock.Fake
	// Client is a client with the owner's token file.
	Client *client.Client

	stopOnce sync.Once
	served   chan error
}

// DiscardLogger is the logger of a test that does not look at the logs:
// production constructors require one.
func DiscardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// NewStateDir makes a short owner-only directory (short enough for a
// socket path) removed when the test ends.
func NewStateDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "oc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Start starts a server and stops it when the test ends.
func Start(t testing.TB, opts Options) *Harness {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = NewStateDir(t)
	}
	if opts.Credentials == nil {
		opts.Credentials = &Credentials{}
	}
	if opts.Idempotency == nil {
		opts.Idempotency = &Idempotency{}
	}
	if opts.Health == nil {
		opts.Health = management.HealthFunc(func(context.Context) (int64, error) { return 1, nil })
	}
	if opts.Clock == nil {
		opts.Clock = clock.NewFake(Epoch)
	}
	if opts.Entropy == nil {
		opts.Entropy = clock.SystemEntropy()
	}
	if opts.Logger == nil {
		opts.Logger = DiscardLogger()
	}
	if opts.Version == "" {
		opts.Version = "test"
	}
	srv, err := management.New(management.Options{
		Credentials:     opts.Credentials,
		ExecutionTokens: opts.ExecutionTokens,
		Idempotency:     opts.Idempotency,
		Health:          opts.Health,
		Clock:           opts.Clock,
		Entropy:         opts.Entropy,
		CursorKey:       opts.CursorKey,
		Version:         opts.Version,
		Ready:           opts.Ready,
		Logger:          opts.Logger,
		Routes:          opts.Routes,
		Authenticated:   opts.Authenticated,
		Limits:          opts.Limits,
		Metrics:         opts.Metrics,
		Refused:         opts.Refused,
	})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, &Harness{
		StateDir:        opts.StateDir,
		Server:          srv,
		Credentials:     opts.Credentials,
		Idempotency:     opts.Idempotency,
		ExecutionTokens: opts.ExecutionTokens,
		Clock:           opts.Clock,
	})
}

// serve takes h.StateDir's lock, bootstraps the owner's token as the
// daemon does, and serves h.Server on the state directory's management
// socket until the test ends.
func serve(t testing.TB, h *Harness) *Harness {
	t.Helper()
	if err := statedir.Prepare(h.StateDir); err != nil {
		t.Fatal(err)
	}
	lock, err := statedir.AcquireLock(h.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := management.BootstrapOperator(context.Background(), lock, h.Server.Operators()); err != nil {
		lock.Close()
		t.Fatal(err)
	}
	sock := filepath.Join(h.StateDir, statedir.SocketName)
	l, err := statedir.Listen(sock, lock)
	if err != nil {
		lock.Close()
		t.Fatal(err)
	}
	h.Socket, h.TokenFile, h.Lock = sock, statedir.OwnerTokenPath(h.StateDir), lock
	h.served = make(chan error, 1)
	h.Client = client.New(sock, client.TokenFile(h.TokenFile))
	go func() { h.served <- h.Server.Serve(l) }()
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Errorf("stopping the test server: %v", err)
		}
	})
	return h
}

// Stop shuts the server down and releases the lock. It is safe to call
// more than once.
func (h *Harness) Stop() error {
	var err error
	h.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = h.Server.Shutdown(ctx)
		if serr := <-h.served; serr != nil {
			err = errors.Join(err, serr)
		}
		err = errors.Join(err, h.Lock.Close())
	})
	return err
}

// AddOperator issues a named operator's credential directly through the
// server's credential service and writes its token to a 0600 file in the
// state directory, returning the file's path and the issued credential.
func (h *Harness) AddOperator(t testing.TB, name string, role management.Role) (string, management.Issued) {
	t.Helper()
	is, err := h.Server.Operators().Issue(context.Background(), name, role)
	if err != nil {
		t.Fatalf("issuing operator %s: %v", name, err)
	}
	path := filepath.Join(h.StateDir, name+".token")
	if err := statedir.WriteTokenFile(path, is.Token); err != nil {
		t.Fatal(err)
	}
	return path, is
}

// ClientFor returns a client that reads its token from tokenFile.
func (h *Harness) ClientFor(tokenFile string) *client.Client {
	return client.New(h.Socket, client.TokenFile(tokenFile))
}

// OwnerToken reads the owner's current token from its file.
func (h *Harness) OwnerToken(t testing.TB) string {
	t.Helper()
	tok, err := statedir.ReadTokenFile(h.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

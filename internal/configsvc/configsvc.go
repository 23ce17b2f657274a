package configsvc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/storage"
)

var _ kernel.RouteProvider = (*Service)(nil)

// Files of the configuration under the state directory.
const (
	// ConfigFileName is the configuration file the operator edits and
	// apply writes: <state>/config.json.
	ConfigFileName = "config.json"
	// LastGoodSuffix names the backup apply keeps of the document that
	// was active before it: <state>/config.json.last-good.
	LastGoodSuffix = ".last-good"
	// GenerationsDir holds the document of every committed generation,
	// by hash: <state>/private/generations/<hash>.json (0600, in 0700
	// directories). Coordination storage keeps only the redacted form, so
	// no secret reference's text is ever stored there.
	GenerationsDir = "generations"
)

// Actors the host publishes generations as.
const (
	ActorFirstStart = "host:first-start"
	ActorAdoption   = "host:adoption"
)

// Options configure the config service.
type Options struct {
	// Store is coordination storage (required).
	Store storage.Store
	// StateDir is the state directory (required).
	StateDir string
	// Default is the configuration activated on a first start with no
	// config file (bootstrap.DefaultConfig()).
	Default []byte
	// Registry is what this release registers (required; the daemon's is
	// bootstrap.ReleaseRegistry() with its extensions).
	Registry *config.Registry
	// Clock is required.
	Clock clock.Clock
	// Logger receives adoptions and disk drift; never a configured value
	// (required).
	Logger *slog.Logger
	// Refresh, when set, runs before every validation (Validate, and so
	// Restore, Apply and the first load of a pinned generation), so that
	// what the registry learns from the state directory (the daemon's:
	// the operator's playbooks) is current when a document is judged.
	Refresh func()
	// Documents, when set, is the store's own keeping of each
	// generation's document: a store several daemons share. Every
	// document published is kept there too (before its generation
	// commits), and a document missing from the state directory is read
	// from there, so a daemon can serve a generation another daemon
	// committed (Follow). Nil for a store only this daemon uses.
	Documents storage.ConfigDocuments
}

// Service owns the configuration's generations: it restores the
// committed one at start, validates, applies (atomic save, then publish
// in one transaction) and hands pinned generations to the host. A disk edit
// alone never changes what runs: only Restore's adoption and Apply publish.
type Service struct {
	opts Options
	reg  *config.Registry
	log  *slog.Logger

	mu     sync.Mutex // serialises Restore and Apply, and runs the hooks in order
	active atomic.Pointer[activeGeneration]
	hooks  []func(*config.Snapshot)

	pinMu  sync.Mutex
	pinned map[int64]*config.Snapshot
}

type activeGeneration struct {
	snap *config.Snapshot
	gen  storage.Generation
}

// New checks the options and returns the service; call Restore before
// anything else.
func New(opts Options) (*Service, error) {
	switch {
	case opts.Store == nil || opts.StateDir == "":
		return nil, errors.New("configsvc: Options need a Store and a StateDir")
	case opts.Registry == nil:
		return nil, errors.New("configsvc: Options need a Registry (the release's is bootstrap.ReleaseRegistry)")
	case opts.Clock == nil:
		return nil, errors.New("configsvc: Options need a Clock")
	case opts.Logger == nil:
		return nil, errors.New("configsvc: Options need a Logger")
	}
	return &Service{opts: opts, reg: opts.Registry, log: opts.Logger, pinned: map[int64]*config.Snapshot{}}, nil
}

// ConfigPath is <state>/config.json.
func (s *Service) ConfigPath() string { return filepath.Join(s.opts.StateDir, ConfigFileName) }

func (s *Service) generationsDir() string {
	return filepath.Join(s.opts.StateDir, statedir.PrivateDir, GenerationsDir)
}

func (s *Service) documentPath(hash string) string {
	return filepath.Join(s.generationsDir(), hash+".json")
}

// Active returns the active generation's snapshot (nil before Restore).
func (s *Service) Active() *config.Snapshot {
	if a := s.active.Load(); a != nil {
		return a.snap
	}
	return nil
}

// ActiveGeneration returns the active generation's record: number, hash,
// redacted normalized configuration, actor and time.
func (s *Service) ActiveGeneration() (storage.Generation, bool) {
	if a := s.active.Load(); a != nil {
		return a.gen, true
	}
	return storage.Generation{}, false
}

// Generation returns the active generation's number; it makes the service
// the health route's backend.
func (s *Service) Generation(context.Context) (int64, error) {
	a := s.active.Load()
	if a == nil {
		return 0, errors.New("configsvc: no configuration is active yet")
	}
	return a.gen.Number, nil
}

// Registry is the registry configurations are validated against.
func (s *Service) Registry() *config.Registry { return s.reg }

// OnApply registers fn to run, in order, with each snapshot that becomes
// active after Restore (an apply). Hooks run one at a time, after the
// generation committed; they must not call Apply. Restore calls none: read
// Active after it.
func (s *Service) OnApply(fn func(*config.Snapshot)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = append(s.hooks, fn)
}

// Validate checks data against the service's registry (after Refresh), without
// any other effect.
func (s *Service) Validate(data []byte) (*config.Snapshot, config.Result) {
	if s.opts.Refresh != nil {
		s.opts.Refresh()
	}
	return config.Validate(data, s.reg)
}

// FileError is a configuration file (or the default) that does not
// validate. Its message lists the diagnostics, which never hold a value.
type FileError struct {
	// Source names what was read: a path, or "the default configuration".
	Source      string
	Diagnostics []config.Diagnostic
	// Err is set instead of Diagnostics when the file could not be read.
	Err error
}

func (e *FileError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("cannot read %s: %v", e.Source, e.Err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s does not validate (%d problem", e.Source, len(e.Diagnostics))
	if len(e.Diagnostics) != 1 {
		b.WriteString("s")
	}
	b.WriteString("):")
	for _, d := range e.Diagnostics {
		b.WriteString("\n  ")
		b.WriteString(d.String())
	}
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// readConfigFile reads and validates <state>/config.json. exists is false
// when there is no file.
func (s *Service) readConfigFile() (data []byte, snap *config.Snapshot, exists bool, err error) {
	path := s.ConfigPath()
	data, err = config.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, true, &FileError{Source: path, Err: err}
	}
	snap, res := s.Validate(data)
	if !res.Valid() {
		return data, nil, true, &FileError{Source: path, Diagnostics: res.Diagnostics}
	}
	return data, snap, true, nil
}

// Restore makes the committed generation active. On a first start (no
// generation committed) it publishes <state>/config.json as generation 1,
// or, with no file, the default configuration without writing a file; a
// file that does not validate stops the start with its diagnostics. When
// the committed generation no longer validates with this release, the
// config file is published over it as the next generation if it
// validates (the adoption is logged); otherwise Restore fails naming both
// problems. A config file that differs from a valid committed generation
// changes nothing (it is logged): only apply publishes it.
func (s *Service) Restore(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	latest, err := s.opts.Store.LatestGeneration(ctx)
	if errors.Is(err, storage.ErrNotFound) {
		return s.firstStart(ctx)
	}
	if err != nil {
		return fmt.Errorf("configsvc: read the committed configuration generation: %w", err)
	}
	snap, committedErr := s.loadGeneration(latest)
	fileData, fileSnap, fileExists, fileErr := s.readConfigFile()
	if committedErr == nil {
		s.setActive(snap, latest)
		if fileExists && (fileErr != nil || fileSnap.Hash != latest.Hash) {
			s.log.Warn("the config file differs from the committed configuration; it takes effect only when applied (open-conduit config apply)",
				"path", s.ConfigPath(), "generation", latest.Number)
		}
		return nil
	}
	switch {
	case !fileExists:
		return fmt.Errorf("the committed configuration (generation %d) cannot be used: %v; and there is no config file at %s to adopt instead: write a valid configuration there (check it with open-conduit config check) and start again",
			latest.Number, committedErr, s.ConfigPath())
	case fileErr != nil:
		return fmt.Errorf("the committed configuration (generation %d) cannot be used: %v; and the config file cannot replace it: %v", latest.Number, committedErr, fileErr)
	}
	gen, err := s.publish(ctx, fileData, fileSnap, latest.Number, ActorAdoption, nil)
	if err != nil {
		return err
	}
	s.log.Warn("adopted the config file: the committed configuration no longer validates with this release",
		"path", s.ConfigPath(), "previous_generation", latest.Number, "generation", gen.Number, "reason", committedErr.Error())
	return nil
}

func (s *Service) firstStart(ctx context.Context) error {
	data, snap, exists, err := s.readConfigFile()
	if err != nil {
		return err
	}
	source := s.ConfigPath()
	if !exists {
		source = "the default configuration"
		if len(s.opts.Default) == 0 {
			return fmt.Errorf("there is no config file at %s and no default configuration; write one there (check it with open-conduit config check)", s.ConfigPath())
		}
		data = s.opts.Default
		var res config.Result
		if snap, res = s.Validate(data); !res.Valid() {
			return &FileError{Source: source, Diagnostics: res.Diagnostics}
		}
	}
	gen, err := s.publish(ctx, data, snap, 0, ActorFirstStart, nil)
	if err != nil {
		return err
	}
	s.log.Info("activated the first configuration generation", "source", source, "generation", gen.Number)
	return nil
}

// loadGeneration validates a committed generation's document again with
// this release's registry.
func (s *Service) loadGeneration(g storage.Generation) (*config.Snapshot, error) {
	data, err := s.readDocument(g.Hash)
	if err != nil {
		return nil, err
	}
	snap, res := s.Validate(data)
	if !res.Valid() {
		return nil, fmt.Errorf("it no longer validates: %w", res.Err())
	}
	if snap.Hash != g.Hash {
		return nil, fmt.Errorf("its document's hash is not the committed one")
	}
	snap.Generation = g.Number
	return snap, nil
}

// readDocument returns the document whose canonical hash is hash: the
// private copy written when it was published, else the config file or its
// backup when either holds it, else (Options.Documents) the one the shared
// store keeps, of which a private copy is then written.
func (s *Service) readDocument(hash string) ([]byte, error) {
	candidates := []string{s.documentPath(hash), s.ConfigPath(), s.ConfigPath() + LastGoodSuffix}
	for _, path := range candidates {
		data, err := config.ReadFile(path)
		if err != nil {
			continue
		}
		if h, ok := canonicalHash(data); ok && h == hash {
			return data, nil
		}
	}
	if s.opts.Documents != nil {
		data, err := s.opts.Documents.ConfigDocument(context.Background(), hash)
		if err == nil {
			if h, ok := canonicalHash(data); ok && h == hash {
				if err := s.writeDocument(hash, data); err != nil {
					s.log.Warn("cannot keep a copy of a configuration document in the state directory", "hash", hash, "error", err.Error())
				}
				return data, nil
			}
			return nil, fmt.Errorf("the document the store keeps for it is not the committed one (its hash differs)")
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return nil, fmt.Errorf("its document cannot be read from the store: %w", err)
		}
		return nil, fmt.Errorf("its document is missing, from %s and from the store", s.documentPath(hash))
	}
	return nil, fmt.Errorf("its document (%s) is missing", s.documentPath(hash))
}

// canonicalHash is the hash config.Validate gives a document: the hex
// SHA-256 of its canonical JSON (RFC 8785). It needs no registry, so a
// document that no longer validates still has its hash.
func canonicalHash(data []byte) (string, bool) {
	v := jsontext.Value(bytes.Clone(data))
	if err := v.Canonicalize(); err != nil {
		return "", false
	}
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:]), true
}

// publish writes the document's private copy, then commits generation
// after+1 with its redacted snapshot and the changed scope records in one
// transaction, and makes it active. after is the generation expected to
// be the latest (0 for none); the transaction refuses otherwise. When
// result is set (an operator's apply), the transaction's last step offers
// the caller's recorder on ctx what the apply will return
// (kernel.RecordResult), so that the request's Idempotency-Key record
// commits with the generation.
func (s *Service) publish(ctx context.Context, data []byte, snap *config.Snapshot, after int64, actor string, result func(storage.Generation) ApplyResult) (storage.Generation, error) {
	if err := s.writeDocument(snap.Hash, data); err != nil {
		return storage.Generation{}, err
	}
	if s.opts.Documents != nil {
		// Before the generation commits, as the private copy: no daemon
		// ever finds a generation whose document it cannot read.
		if err := s.opts.Documents.PutConfigDocument(ctx, snap.Hash, data); err != nil {
			return storage.Generation{}, fmt.Errorf("configsvc: keep the document in the store: %w", err)
		}
	}
	gen := storage.Generation{Number: after + 1, Hash: snap.Hash, Normalized: snap.Normalized, Actor: actor, CreatedAt: s.opts.Clock.Now()}
	var prev *config.Snapshot
	if a := s.active.Load(); a != nil {
		prev = a.snap
	}
	err := s.opts.Store.WithTx(ctx, func(tx storage.Tx) error {
		if err := checkScopesInUse(ctx, tx, prev, snap); err != nil {
			return err
		}
		// Apply checked the slots before saving the file; this holds the
		// rule for adoption too, and against Work created since.
		if diags, err := checkSlots(ctx, tx, snap); err != nil {
			return err
		} else if len(diags) > 0 {
			return invalidConfig(diags)
		}
		if err := tx.InsertGeneration(ctx, &gen); err != nil {
			if errors.Is(err, storage.ErrFenced) || errors.Is(err, storage.ErrDuplicate) {
				return staleGeneration(after)
			}
			return err
		}
		if err := putScopeRecords(ctx, tx, snap, gen); err != nil {
			return err
		}
		if result == nil {
			return nil
		}
		return kernel.RecordResult(ctx, tx, result(gen))
	})
	if err != nil {
		return storage.Generation{}, err
	}
	snap.Generation = gen.Number
	s.setActive(snap, gen)
	return gen, nil
}

func (s *Service) setActive(snap *config.Snapshot, gen storage.Generation) {
	s.active.Store(&activeGeneration{snap: snap, gen: gen})
	s.pinMu.Lock()
	s.pinned[gen.Number] = snap
	s.pinMu.Unlock()
}

func staleGeneration(expected int64) error {
	return &Refusal{Kind: ErrStaleGeneration,
		Message: fmt.Sprintf("the active configuration is no longer generation %d; read it again (open-conduit config get) and apply against the current generation", expected)}
}

// checkScopesInUse refuses to remove or reparent a scope that still has
// nonterminal Work.
func checkScopesInUse(ctx context.Context, rd storage.Reader, prev, next *config.Snapshot) error {
	if prev == nil {
		return nil
	}
	var busy []string
	for _, old := range prev.Scopes() {
		if old.Removed {
			continue
		}
		cur, ok := next.Scope(old.ID)
		change := ""
		switch {
		case !ok || cur.Removed:
			change = "removed"
		case cur.Parent != old.Parent:
			change = "reparented"
		default:
			continue
		}
		n, err := rd.CountWork(ctx, old.ID, storage.NonterminalWorkStates)
		if err != nil {
			return err
		}
		if n > 0 {
			busy = append(busy, fmt.Sprintf("%s (%s, %d unfinished Work)", old.ID, change, n))
		}
	}
	if len(busy) == 0 {
		return nil
	}
	return &Refusal{Kind: ErrScopeInUse,
		Message: "scope " + strings.Join(busy, ", ") + " still has unfinished Work; let it finish or cancel it (open-conduit work list --scope ID), then apply again"}
}

// putScopeRecords writes the record of every scope whose metadata the new
// generation changes, and marks removed the records of scopes it no
// longer names.
func putScopeRecords(ctx context.Context, tx storage.Tx, snap *config.Snapshot, gen storage.Generation) error {
	have, err := tx.ListScopeRecords(ctx)
	if err != nil {
		return err
	}
	old := make(map[string]storage.ScopeRecord, len(have))
	for _, r := range have {
		old[r.ID] = r
	}
	for _, d := range snap.DomainScopes() {
		rec := storage.ScopeRecord{ID: d.ID, Parent: d.Parent, Enabled: d.Enabled, Removed: d.Removed, Active: d.Active,
			Bindings: d.Bindings, Routes: d.Routes, Generation: gen.Number, UpdatedAt: gen.CreatedAt}
		prev, ok := old[d.ID]
		delete(old, d.ID)
		if ok && rec.Removed {
			// A tombstone keeps the identity of the scope whose slot it
			// holds (its bindings are not read), so that checkSlots can
			// tell that scope coming back from another taking its id.
			rec.Parent, rec.Bindings = prev.Parent, prev.Bindings
		}
		if ok && sameScope(prev, rec) {
			continue
		}
		if err := tx.PutScopeRecord(ctx, &rec); err != nil {
			return err
		}
	}
	for _, prev := range old {
		if prev.Removed && !prev.Active {
			continue
		}
		prev.Removed, prev.Active, prev.Generation, prev.UpdatedAt = true, false, gen.Number, gen.CreatedAt
		if err := tx.PutScopeRecord(ctx, &prev); err != nil {
			return err
		}
	}
	return nil
}

func sameScope(a, b storage.ScopeRecord) bool {
	return a.Parent == b.Parent && a.Enabled == b.Enabled && a.Removed == b.Removed && a.Active == b.Active &&
		slices.Equal(a.Bindings, b.Bindings) && slices.Equal(a.Routes, b.Routes)
}

// ApplyRequest is a configuration to publish.
type ApplyRequest struct {
	// Config is the document, saved to <state>/config.json as given.
	Config []byte
	// ExpectedGeneration must be the active generation's number.
	ExpectedGeneration int64
	// ExpectedHash, when set, must be the document's canonical hash (the
	// hash a validation of the same document returned).
	ExpectedHash string
	// Actor is who applies it (operator:<name>).
	Actor string
	// Retry says the request may be the retry of an apply whose
	// generation committed but whose answer was lost (the management
	// route sets it for every request, since each carries an
	// Idempotency-Key): when the active generation is the very one it
	// asked for (same document hash, published by the same actor on the
	// expected generation), that apply is completed instead of refused as
	// stale.
	Retry bool
}

// ApplyResult is the published generation.
type ApplyResult struct {
	Generation storage.Generation
	Previous   int64
	Snapshot   *config.Snapshot
	Warnings   []config.Warning
	// Completed: the generation was already active, published by the
	// request this one retries (ApplyRequest.Retry); nothing changed now.
	Completed bool
	// Unchanged: the document is the active generation's (the same
	// canonical hash), so no generation was made; Generation is the
	// active one and Previous equals it.
	Unchanged bool
}

// invalidConfig is the refusal of a configuration that does not validate,
// carrying its diagnostics.
func invalidConfig(diags []config.Diagnostic) *Refusal {
	n := len(diags)
	plural := "s"
	if n == 1 {
		plural = ""
	}
	return &Refusal{Kind: ErrInvalidConfig, Diagnostics: diags,
		Message: fmt.Sprintf("the configuration does not validate (%d problem%s; see diagnostics); fix them and send it again", n, plural)}
}

// Apply publishes a configuration: revalidate it and check the candidate
// hash and the expected generation; save it atomically to
// <state>/config.json (same-directory 0600 temporary file, fsync, rename,
// parent fsync), keeping the previously active document as
// config.json.last-good; then publish the generation, its redacted
// snapshot and the changed scope records in one transaction. A crash
// before that commit keeps the old generation. Removing or reparenting a
// scope with nonterminal Work is scope_in_use; a removed scope's id taken
// by another scope while its Work is stored is scope_slot_taken. The OnApply hooks run after
// the commit. A secret written in the redacted form config get shows keeps
// the active generation's reference (keepRedacted). The publishing
// transaction's last step runs the kernel.ResultRecorder ctx carries, if
// any, with the ApplyResult Apply returns: the management route records
// the request's Idempotency-Key response there, and the recorder's error
// rolls the apply back like any other (the file is put back). An apply
// that publishes nothing (Completed, Unchanged) runs no transaction and
// no recorder.
func (s *Service) Apply(ctx context.Context, req ApplyRequest) (ApplyResult, error) {
	req.Config = s.keepRedacted(req.Config)
	snap, res := s.Validate(req.Config)
	if !res.Valid() {
		return ApplyResult{}, invalidConfig(res.Diagnostics)
	}
	if req.ExpectedHash != "" && req.ExpectedHash != snap.Hash {
		return ApplyResult{}, &Refusal{Kind: ErrHashMismatch,
			Message: "the configuration's hash is not the expected hash: it changed since it was validated; validate it again and apply the hash it returns"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active.Load() == nil {
		return ApplyResult{}, errors.New("configsvc: Apply before Restore")
	}
	// Judged against the store's latest generation, which another daemon
	// sharing the store may have committed since this one last looked.
	if _, err := s.follow(ctx); err != nil {
		s.log.Warn("cannot serve the latest configuration generation before an apply", "error", err.Error())
	}
	cur := s.active.Load()
	if req.ExpectedGeneration != cur.gen.Number {
		if req.Retry && cur.gen.Number == req.ExpectedGeneration+1 && cur.gen.Hash == snap.Hash && cur.gen.Actor == req.Actor {
			return ApplyResult{Generation: cur.gen, Previous: req.ExpectedGeneration, Snapshot: cur.snap, Warnings: res.Warnings, Completed: true}, nil
		}
		return ApplyResult{}, staleGeneration(req.ExpectedGeneration)
	}
	if snap.Hash == cur.gen.Hash {
		// The active configuration already: nothing to save or publish.
		return ApplyResult{Generation: cur.gen, Previous: cur.gen.Number, Snapshot: cur.snap, Warnings: res.Warnings, Unchanged: true}, nil
	}
	if err := checkScopesInUse(ctx, s.opts.Store, cur.snap, snap); err != nil {
		return ApplyResult{}, err
	}
	if diags, err := checkSlots(ctx, s.opts.Store, snap); err != nil {
		return ApplyResult{}, err
	} else if len(diags) > 0 {
		return ApplyResult{}, invalidConfig(diags)
	}
	undo, err := s.save(req.Config, cur.gen.Hash)
	if err != nil {
		return ApplyResult{}, err
	}
	applied := func(gen storage.Generation) ApplyResult {
		return ApplyResult{Generation: gen, Previous: cur.gen.Number, Snapshot: snap, Warnings: res.Warnings}
	}
	gen, err := s.publish(ctx, req.Config, snap, cur.gen.Number, req.Actor, applied)
	if err != nil {
		if uerr := undo(); uerr != nil {
			s.log.Error("apply failed after saving the config file, and the file could not be put back; it holds a configuration that is not committed",
				"path", s.ConfigPath(), "error", uerr.Error())
		}
		return ApplyResult{}, err
	}
	s.log.Info("applied a configuration", "generation", gen.Number, "previous_generation", cur.gen.Number, "actor", req.Actor)
	for _, fn := range s.hooks {
		fn(snap)
	}
	return applied(gen), nil
}

// Follow makes the store's latest generation active when it is not the
// one the service serves: a generation another daemon sharing the store
// committed (through an apply, a set or an adoption). It publishes it
// here as an apply does: the generation validated again with this
// release, its document saved to <state>/config.json (the one replaced
// kept as config.json.last-good), then the OnApply hooks. It reports
// whether the active generation changed. A latest generation that cannot
// be used here (its document missing, or it does not validate with this
// release's registry: an executor, package or playbook this daemon lacks)
// is an error, and the active generation stays; the toolbelt's check in
// storage, which asks for the latest generation's snapshot, then fails
// closed.
func (s *Service) Follow(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.follow(ctx)
}

func (s *Service) follow(ctx context.Context) (bool, error) {
	cur := s.active.Load()
	if cur == nil {
		return false, errors.New("configsvc: Follow before Restore")
	}
	latest, err := s.opts.Store.LatestGeneration(ctx)
	if err != nil {
		return false, fmt.Errorf("configsvc: read the committed configuration generation: %w", err)
	}
	if latest.Number <= cur.gen.Number {
		return false, nil
	}
	snap, err := s.Snapshot(ctx, latest.Number)
	if err != nil {
		return false, err
	}
	if data, err := s.readDocument(latest.Hash); err == nil {
		if _, err := s.save(data, cur.gen.Hash); err != nil {
			s.log.Warn("cannot write the configuration another daemon applied to the config file", "path", s.ConfigPath(), "error", err.Error())
		}
	}
	// Said before it is served: whoever sees the new generation active
	// finds the line in the log already.
	s.log.Info("serving a configuration generation committed through another daemon", "generation", latest.Number, "previous_generation", cur.gen.Number, "actor", latest.Actor)
	s.setActive(snap, latest)
	for _, fn := range s.hooks {
		fn(snap)
	}
	return true, nil
}

// save writes data to <state>/config.json atomically after keeping the
// document of the active generation (activeHash) as config.json.last-good.
// undo puts back what the file held before.
func (s *Service) save(data []byte, activeHash string) (undo func() error, err error) {
	path := s.ConfigPath()
	before, readErr := os.ReadFile(path)
	hadFile := readErr == nil
	if readErr != nil && !errors.Is(readErr, fs.ErrNotExist) {
		return nil, fmt.Errorf("configsvc: read %s before replacing it: %w", path, readErr)
	}
	if prev, err := s.readDocument(activeHash); err == nil {
		if err := writeFileAtomic(path+LastGoodSuffix, prev); err != nil {
			return nil, err
		}
	}
	if err := writeFileAtomic(path, data); err != nil {
		return nil, err
	}
	return func() error {
		if hadFile {
			return writeFileAtomic(path, before)
		}
		return os.Remove(path)
	}, nil
}

func (s *Service) writeDocument(hash string, data []byte) error {
	if err := statedir.EnsurePrivateSubdir(filepath.Join(s.opts.StateDir, statedir.PrivateDir)); err != nil {
		return err
	}
	if err := statedir.EnsurePrivateSubdir(s.generationsDir()); err != nil {
		return err
	}
	return writeFileAtomic(s.documentPath(hash), data)
}

// writeFileAtomic writes data to path: a 0600 temporary file in the same
// directory, fsync, rename over path, fsync of the directory.
func writeFileAtomic(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// Snapshot returns the snapshot of a committed generation, as the
// attempts pinned to it see it: the active one, or an older one restored
// from storage and validated again with this release on first use.
func (s *Service) Snapshot(ctx context.Context, generation int64) (*config.Snapshot, error) {
	s.pinMu.Lock()
	snap, ok := s.pinned[generation]
	s.pinMu.Unlock()
	if ok {
		return snap, nil
	}
	g, err := s.opts.Store.GetGeneration(ctx, generation)
	if err != nil {
		return nil, err
	}
	snap, err = s.loadGeneration(g)
	if err != nil {
		return nil, fmt.Errorf("configsvc: configuration generation %d cannot be used: %w", generation, err)
	}
	s.pinMu.Lock()
	defer s.pinMu.Unlock()
	if have, ok := s.pinned[generation]; ok {
		return have, nil
	}
	s.pinned[generation] = snap
	return snap, nil
}

// Routes returns the routes of scope in the active generation, adapted for
// the runtime's router; the service is a kernel.RouteProvider that follows
// every apply without being rebuilt. An inactive or unknown scope has none.
func (s *Service) Routes(_ context.Context, scope string) ([]kernel.Route, error) {
	snap := s.Active()
	if snap == nil {
		return nil, nil
	}
	sc, ok := snap.Scope(scope)
	if !ok || !sc.Active {
		return nil, nil
	}
	out := make([]kernel.Route, 0, len(sc.Routes))
	for _, rt := range sc.Routes {
		out = append(out, kernel.Route{ID: rt.ID, MatchType: rt.Match.Type, MatchSource: rt.Match.Source, Binding: rt.Binding, Effect: kernel.Effect(rt.Effect)})
	}
	return out, nil
}

package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/daemon"
	"github.com/open-conduit/open-conduit/internal/statedir"
)

// The finding codes of the configuration's checks.
const (
	CodeConfigSource       = "config_source"
	CodeConfigUnreadable   = "config_unreadable"
	CodeConfigInvalid      = "config_invalid"
	CodeConfigOK           = "config_ok"
	CodeConfigWarning      = "config_warning"
	CodeConfigNotApplied   = "config_not_applied"
	CodeGrantWarning       = "grant_warning"
	CodeGrantsOK           = "grants_ok"
	CodePlaybookRefused    = "playbook_refused"
	CodeSecretUnresolved   = "secret_unresolved"
	CodeSecretsOK          = "secrets_ok"
	CodeSecretsUnchecked   = "secrets_unchecked"
	CodeKeyringAvailable   = "keyring_available"
	CodeKeyringUnavailable = "keyring_unavailable"
)

// grantCodes are the warnings of the spec's grants check.
var grantCodes = map[string]bool{config.WarnPlaybookNotGranted: true, config.WarnToolsetSpelledOut: true}

// source is the configuration document doctor checks.
type source struct {
	label     string // what it is, for messages
	note      string // why it was chosen, when not obvious
	file      string // the file an operator edits to change it
	playbooks string // the operator's playbooks directory it is judged with
	data      []byte
}

// configSource chooses the document: the file given, else the daemon's
// active generation, else <state>/config.json, else the default a first
// start activates.
func (r *run) configSource() (source, bool) {
	stateFile := r.path(configsvc.ConfigFileName)
	statePlaybooks := r.path(daemon.PlaybooksDir)
	if f := r.opts.ConfigFile; f != "" {
		data, err := config.ReadFile(f)
		if err != nil {
			r.add(SeverityError, CodeConfigUnreadable, "the configuration file "+f+" cannot be read: "+errText(err), "ls -l "+f)
			return source{}, false
		}
		return source{label: "the configuration file " + f, file: f, playbooks: filepath.Join(filepath.Dir(f), config.PlaybooksDir), data: data}, true
	}
	if r.daemonUp && r.activeHash != "" {
		p := r.path(statedir.PrivateDir, configsvc.GenerationsDir, r.activeHash+".json")
		if data, err := os.ReadFile(p); err == nil {
			return source{label: fmt.Sprintf("the daemon's active configuration (generation %d)", r.activeGen), file: stateFile, playbooks: statePlaybooks, data: data}, true
		}
		r.add(SeverityWarning, CodeConfigUnreadable, "the document of the daemon's active generation ("+p+") cannot be read; checking "+stateFile+" instead", "ls -l "+p)
	}
	data, err := config.ReadFile(stateFile)
	switch {
	case err == nil:
		return source{label: "the configuration file " + stateFile, file: stateFile, playbooks: statePlaybooks, data: data}, true
	case errors.Is(err, fs.ErrNotExist) && r.opts.Default != nil:
		return source{label: "the default configuration", note: "; the state directory has no config.json, so a first start activates it", file: stateFile, playbooks: statePlaybooks, data: r.opts.Default}, true
	case errors.Is(err, fs.ErrNotExist):
		r.add(SeverityInfo, CodeConfigSource, "the state directory has no config.json; no configuration was checked", "open-conduit doctor --config FILE")
		return source{}, false
	}
	r.add(SeverityError, CodeConfigUnreadable, "the configuration file "+stateFile+" cannot be read: "+errText(err), "ls -l "+stateFile)
	return source{}, false
}

// checkConfig validates the configuration and reports its diagnostics,
// warnings and the grants check. When the daemon answers, the daemon's own
// validation (its registry, its playbooks) is reported; the local one is
// used otherwise. It returns the local snapshot, nil when invalid.
func (r *run) checkConfig(ctx context.Context) *config.Snapshot {
	src, ok := r.configSource()
	if !ok {
		return nil
	}
	reg := r.opts.Registry
	pbs, problems := config.ReadPlaybooks(src.playbooks)
	problems = append(problems, reg.SetOperatorPlaybooks(pbs)...)
	for _, p := range problems {
		r.add(SeverityWarning, CodePlaybookRefused, "a playbook is left out: "+p.Error(), "fix or rename the file, then: open-conduit config check "+src.file)
	}
	snap, res := config.Validate(src.data, reg)
	diags, warns := toAPI(res)
	judge := "this release"
	if r.daemonUp {
		ctx, cancel := r.withTimeout(ctx, daemonRequestDeadline)
		v, err := r.opts.Daemon.ValidateConfig(ctx, src.data)
		cancel()
		if err == nil {
			diags, warns, judge = v.Diagnostics, v.Warnings, "the daemon"
		}
	}
	hash := ""
	if snap != nil {
		hash = ", hash " + snap.Hash
	}
	r.add(SeverityInfo, CodeConfigSource, "checked "+src.label+" as "+judge+" judges it"+hash+src.note, "")
	for _, d := range diags {
		p := d.Pointer
		if p == "" {
			p = "(document)"
		}
		r.add(SeverityError, CodeConfigInvalid, src.label+" is invalid at "+p+": "+d.Code+": "+d.Remedy,
			"edit "+src.file+", then: open-conduit config check "+src.file)
	}
	if len(diags) > 0 {
		return snap
	}
	r.add(SeverityOK, CodeConfigOK, src.label+" is valid", "")
	grants := 0
	for _, w := range warns {
		p := w.Pointer
		if p == "" {
			p = "(document)"
		}
		msg := p + ": " + w.Code + ": " + w.Message
		if grantCodes[w.Code] {
			grants++
			r.add(SeverityWarning, CodeGrantWarning, msg, r.grantFix(snap, w, src))
			continue
		}
		r.add(SeverityWarning, CodeConfigWarning, msg, "edit "+src.file+", then: open-conduit config check "+src.file+" && open-conduit config apply "+src.file)
	}
	if grants == 0 {
		r.add(SeverityOK, CodeGrantsOK, "grants: every binding's playbook is granted what it uses, and no operation list spells out an earlier version of a toolset", "")
	}
	r.checkApplied(snap, src)
	return snap
}

// checkApplied says when <state>/config.json differs from the daemon's
// active generation: it was edited, and the edit is not applied.
func (r *run) checkApplied(snap *config.Snapshot, src source) {
	if !r.daemonUp || r.activeHash == "" || r.opts.ConfigFile != "" {
		return
	}
	f := r.path(configsvc.ConfigFileName)
	data, err := config.ReadFile(f)
	if err != nil {
		return
	}
	fileSnap, _ := config.Validate(data, r.opts.Registry)
	if fileSnap == nil || fileSnap.Hash == r.activeHash {
		return
	}
	r.add(SeverityInfo, CodeConfigNotApplied, f+" differs from the daemon's active generation (it was edited since the last apply); the daemon runs the active one",
		"open-conduit config check "+f+" && open-conduit config apply "+f)
}

// grantFix is the command that answers a grant warning: the config set
// the toolset_spelled_out warning names, or one that adds a playbook's
// missing operations to its binding.
func (r *run) grantFix(snap *config.Snapshot, w api.Warning, src source) string {
	if _, cmd, ok := strings.Cut(w.Message, "instead: "); ok && strings.HasPrefix(cmd, "open-conduit config set ") {
		return cmd
	}
	if w.Code == config.WarnPlaybookNotGranted && snap != nil {
		// /scopes/<scope>/bindings/<binding>/playbook or …/config
		parts := strings.Split(w.Pointer, "/")
		if len(parts) == 6 && parts[1] == "scopes" && parts[3] == "bindings" {
			if cmd, ok := addOperations(snap, parts[2], parts[4]); ok {
				return cmd + " (its scope's authorization.operations must grant them too)"
			}
		}
	}
	return "edit " + src.file + ", then: open-conduit config check " + src.file + " && open-conduit config apply " + src.file
}

// addOperations is the config set of a binding's operations with what its
// playbook uses and it lacks.
func addOperations(snap *config.Snapshot, scope, binding string) (string, bool) {
	eb, ok := snap.Binding(scope, binding)
	sc, ok2 := snap.Config().Scopes[scope]
	if !ok || !ok2 || sc.Bindings[binding] == nil {
		return "", false
	}
	have := map[string]bool{}
	for _, op := range eb.Operations {
		have[op] = true
	}
	for _, ops := range eb.Grants {
		for _, op := range ops {
			have[op] = true
		}
	}
	list := slices.Clone(sc.Bindings[binding].Operations)
	if list == nil {
		list = []string{}
	}
	added := false
	for _, op := range eb.PlaybookOperations {
		if !have[op] && !slices.Contains(list, op) {
			list = append(list, op)
			added = true
		}
	}
	if !added {
		return "", false
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "", false
	}
	return "open-conduit config set /scopes/" + scope + "/bindings/" + binding + "/operations '" + string(b) + "'", true
}

func toAPI(res config.Result) ([]api.Diagnostic, []api.Warning) {
	diags := make([]api.Diagnostic, 0, len(res.Diagnostics))
	for _, d := range res.Diagnostics {
		diags = append(diags, api.Diagnostic{Pointer: d.Pointer, Code: string(d.Code), Remedy: d.Remedy})
	}
	warns := make([]api.Warning, 0, len(res.Warnings))
	for _, w := range res.Warnings {
		warns = append(warns, api.Warning{Pointer: w.Pointer, Code: w.Code, Message: w.Message})
	}
	return diags, warns
}

// secretFixes say, by the resolver's code, how to make a secret resolve.
var secretFixes = map[string]string{
	config.SecretUnreadable:    "create <state>/secrets.json owner-only (chmod 600) holding a JSON object with the key the reference of secret %[2]s names",
	config.SecretUnsafeFile:    "chmod 600 <state>/secrets.json (a regular file you own)",
	config.SecretTimeout:       "run the command of secret %[2]s's cmd: reference by hand as the daemon's user: it must finish within 10 s",
	config.SecretTooLarge:      "keep the secret %[2]s under 64 KiB (and secrets.json under 1 MiB)",
	config.SecretEmpty:         "store a non-empty value for secret %[2]s",
	config.SecretCommandFailed: "run the command of secret %[2]s's cmd: reference by hand as the daemon's user and make it succeed",
	config.KeyringUnavailable:  "start the platform keyring for the daemon's user (on Linux, a Secret Service such as gnome-keyring over D-Bus), or move secret %[2]s to an env: or file: reference",
}

// notFoundFixes say, by scheme, where a secret_not_found secret goes.
var notFoundFixes = map[config.Scheme]string{
	config.SchemeEnv:     "set the variable the env: reference of secret %[2]s names in the daemon's environment, then restart the daemon",
	config.SchemeFile:    "add the key the file: reference of secret %[2]s names to <state>/secrets.json (a JSON object, chmod 600)",
	config.SchemeKeyring: "store the item the keyring: reference of secret %[2]s names with the platform's keyring tool (secret-tool store on Linux, security add-generic-password on macOS)",
}

// checkSecrets resolves every secret the configuration names, with the
// resolver the daemon uses, and drops each value at once. A secret an
// active binding selects that does not resolve is an error (its Work would
// be held); another one a warning. It reports whether a secret uses the
// keyring.
func (r *run) checkSecrets(ctx context.Context, snap *config.Snapshot) bool {
	if snap == nil {
		r.add(SeverityInfo, CodeSecretsUnchecked, "no valid configuration was checked, so no secret was resolved", "")
		return false
	}
	names := snap.SecretNames()
	if len(names) == 0 {
		r.add(SeverityOK, CodeSecretsOK, "the configuration names no secret", "")
		return false
	}
	selected := map[string][]string{}
	for _, sc := range snap.Scopes() {
		if !sc.Active {
			continue
		}
		for bid := range sc.Bindings {
			sel, _ := snap.BindingSecrets(sc.ID, bid)
			for _, name := range sel {
				selected[name] = append(selected[name], sc.ID+"/"+bid)
			}
		}
	}
	res := &config.Resolver{Keyring: r.opts.Keyring, StateDir: r.state(), LookupEnv: r.opts.LookupEnv, Reaper: r.opts.Reaper, After: r.opts.After}
	usesKeyring, bad := false, 0
	for _, name := range names {
		ref, _ := snap.Secret(name)
		scheme := string(ref.Scheme())
		if ref.Scheme() == config.SchemeKeyring {
			usesKeyring = true
		}
		rctx, cancel := r.withTimeout(ctx, SecretTimeout)
		// The value is dropped at once: never kept, compared or shown.
		_, err := res.ResolveRef(rctx, ref)
		cancel()
		if err == nil {
			continue
		}
		bad++
		code, why := "secret_unresolved", "it does not resolve"
		var se *config.SecretError
		if errors.As(err, &se) {
			code, why = se.Code, se.Message
		}
		users := selected[name]
		sort.Strings(users)
		sev, who := SeverityWarning, "no active binding selects it"
		if len(users) > 0 {
			sev, who = SeverityError, "selected by "+strings.Join(users, ", ")+": their Work is held until it resolves"
		}
		msg := "secret " + name + " (" + scheme + ": reference; " + who + ") does not resolve: " + code + ": " + why
		if ref.Scheme() == config.SchemeEnv {
			msg += " (doctor checks env: references in its own environment; the daemon resolves them in the daemon's)"
		}
		fix := "fix the source of secret " + name + ", then: open-conduit doctor"
		if f, ok := notFoundFixes[ref.Scheme()]; ok && code == config.SecretNotFound {
			fix = strings.ReplaceAll(fmt.Sprintf(f, scheme, name), "<state>", r.state())
		} else if f, ok := secretFixes[code]; ok {
			fix = strings.ReplaceAll(fmt.Sprintf(f, scheme, name), "<state>", r.state())
		}
		r.add(sev, CodeSecretUnresolved, msg, fix)
	}
	if bad == 0 {
		r.add(SeverityOK, CodeSecretsOK, fmt.Sprintf("every secret the configuration names resolves (%d)", len(names)), "")
	}
	return usesKeyring
}

// keyringProbe is the item the keyring probe asks for; that the keyring
// answers "not found" is enough.
const (
	keyringProbeService = "open-conduit-doctor"
	keyringProbeUser    = "probe"
)

// checkKeyring asks the keyring for an item that does not exist: an
// answer, "not found" included, says the keyring can be asked.
func (r *run) checkKeyring(ctx context.Context, used bool) {
	ch := make(chan error, 1)
	go func() {
		_, err := r.opts.Keyring.Get(keyringProbeService, keyringProbeUser)
		ch <- err
	}()
	var err error
	select {
	case err = <-ch:
	case <-r.opts.After(SecretTimeout):
		err = errors.New("it did not answer in time")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil || errors.Is(err, config.ErrKeyringNotFound) {
		r.add(SeverityOK, CodeKeyringAvailable, "the platform keyring answers, for keyring: secrets", "")
		return
	}
	sev, why := SeverityInfo, "no secret uses keyring:, so nothing needs it"
	if used {
		sev, why = SeverityWarning, "the configuration has keyring: secrets"
	}
	r.add(sev, CodeKeyringUnavailable, "the platform keyring cannot be asked ("+why+")",
		"start the platform keyring for this user (on Linux, a Secret Service such as gnome-keyring over D-Bus, with DBUS_SESSION_BUS_ADDRESS set), or use env: or file: references")
}

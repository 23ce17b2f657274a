package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newPackagesCmd) }

// isTerminal reports whether r is a terminal the install can ask on (a
// seam for tests).
var isTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func newPackagesCmd(s Streams) *cobra.Command {
	cmd := newPackagesListCmd(s, "packages")
	cmd.Short = "Install, list, show and remove installed packages"
	cmd.AddCommand(newPackagesListCmd(s, "list"), newPackagesShowCmd(s), newPackagesInstallCmd(s), newPackagesRemoveCmd(s))
	return cmd
}

func newPackagesListCmd(s Streams, use string) *cobra.Command {
	return withOutput(&cobra.Command{
		Use:   use,
		Short: "List the installed packages",
		Long: `List the installed packages: name, version, kind, state (running,
starting, restarting, stopped, changed or unavailable) and, for one that
does not run or keeps crashing, why. See one with 'open-conduit packages show NAME'.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runList(cmd, s, (*client.Client).Packages, []string{"NAME", "VERSION", "KIND", "STATE", "PROBLEM"}, func(p client.Package) []string {
				problem := "-"
				if p.Problem != nil {
					problem = p.Problem.Code
				}
				return []string{p.Name, p.Version, p.Kind, p.State, problem}
			})
		},
	})
}

func newPackagesShowCmd(s Streams) *cobra.Command {
	return withOutput(&cobra.Command{
		Use:   "show NAME",
		Short: "Show an installed package: what it provides, its permissions and its state",
		Args:  oneArg("package NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			p, err := c.Package(cmd.Context(), args[0])
			if err != nil {
				return clientFailure(err, t)
			}
			if done, err := printAs(cmd, s.Out, p.Raw, p.Name); done {
				return err
			}
			printPackage(s.Out, p.Package, "Accepted permissions")
			fmt.Fprintf(s.Out, "Files hash: %s\n", p.FilesHash)
			if p.InstalledAt != nil {
				fmt.Fprintf(s.Out, "Installed:  %s\n", when(*p.InstalledAt))
			}
			fmt.Fprintf(s.Out, "State:      %s (restarts %d)\n", p.State, p.Restarts)
			if p.Problem != nil {
				fmt.Fprintf(s.Out, "Problem:    %s: %s\n", p.Problem.Code, p.Problem.Message)
			}
			return nil
		},
	})
}

// printPackage prints what a package is and provides, and its
// permissions under the heading given.
func printPackage(w io.Writer, p client.Package, permsHeading string) {
	fmt.Fprintf(w, "Package %s %s (%s)\n", p.Name, p.Version, p.Kind)
	if p.Summary != "" {
		fmt.Fprintf(w, "  %s\n", p.Summary)
	}
	pv := p.Provides
	fmt.Fprintln(w, "Provides:")
	none := true
	for _, op := range pv.Operations {
		none = false
		kind := ""
		if op.Kind != "" && op.Kind != "call" {
			kind = " [" + op.Kind + "]"
		}
		fmt.Fprintf(w, "  operation %s%s: %s\n", op.Name, kind, op.Summary)
	}
	for _, ts := range pv.Toolsets {
		none = false
		fmt.Fprintf(w, "  toolset @%s: %s\n", ts.Name, strings.Join(ts.Operations, ", "))
	}
	if pv.OperationGate {
		none = false
		fmt.Fprintln(w, "  a gate, asked before other extensions' operations run in the scopes it is enabled for")
	}
	if pv.StartGate {
		none = false
		fmt.Fprintln(w, "  a start gate, asked before a Work's first attempt in the scopes it is enabled for")
	}
	for _, x := range pv.Executors {
		none = false
		line := "  executor " + x.Name
		if x.Summary != "" {
			line += ": " + x.Summary
		}
		if x.Playbook != "" {
			line += " (playbook " + x.Playbook + ")"
		}
		fmt.Fprintln(w, line)
	}
	for _, pb := range pv.Playbooks {
		none = false
		fmt.Fprintf(w, "  playbook %s\n", pb)
	}
	if none {
		if p.Kind == "mcp" {
			fmt.Fprintln(w, "  the MCP server's tools, listed when it starts")
		} else {
			fmt.Fprintln(w, "  nothing")
		}
	}
	fmt.Fprintf(w, "%s:\n", permsHeading)
	if len(p.Permissions) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, perm := range p.Permissions {
		fmt.Fprintf(w, "  %s: %s\n", perm, permissionMeaning[perm])
	}
}

// permissionMeaning says what each permission lets a package do.
var permissionMeaning = map[string]string{
	"operation.gate":  "its gate is asked about other extensions' calls, and can park or refuse them",
	"work.start_gate": "its start gate is asked before a Work's first attempt, and can park or fail it",
	"event.emit":      "its operations emit Events for the executions that call them",
	"executor.run":    "it runs executions: bindings can name its executors",
}

func newPackagesInstallCmd(s Streams) *cobra.Command {
	var accept bool
	var key string
	cmd := &cobra.Command{
		Use:   "install DIR [--accept-permissions]",
		Short: "Install a package from its directory, or replace the installed version (admin)",
		Long: `Install the package in DIR (the directory holding open-conduit-package.json)
into the daemon's state directory. The daemon checks the manifest and the
files it names, and the command shows what the package provides and the
permissions it asks for; on a terminal it then asks y/N, otherwise it installs
only with --accept-permissions. The files installed are exactly those shown
(their hash is checked again). An installed package of the same name is
replaced. The package runs at once; it is active in a configuration only where
extensions.<name> enables it. Needs the admin role.`,
		Example: `open-conduit packages install ./deploy-package
open-conduit packages install ./deploy-package --accept-permissions`,
		Args: oneArg("package DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return usagef("cannot resolve the directory %s: %v", args[0], err)
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			ins, err := c.InspectPackage(cmd.Context(), dir)
			if err != nil {
				return packageFailure(s, cmd, err, t)
			}
			p := ins.Package
			if !wantJSON(cmd) {
				printPackage(s.Out, p, "Permissions it asks for")
				for _, w := range ins.Warnings {
					fmt.Fprintln(s.Out, "warning:", w)
				}
				if ins.Replaces != "" {
					fmt.Fprintf(s.Out, "It replaces the installed %s %s.\n", p.Name, ins.Replaces)
				}
			}
			if !accept {
				if !isTerminal(s.In) {
					return failf("not installed: package %s needs its permissions accepted; run it on a terminal to answer, or pass --accept-permissions", p.Name)
				}
				fmt.Fprintf(s.Out, "Install %s %s with these permissions? [y/N] ", p.Name, p.Version)
				answer, _ := bufio.NewReader(s.In).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					return failf("not installed: the permissions were not accepted")
				}
			}
			res, err := c.InstallPackage(cmd.Context(), client.InstallPackageRequest{Dir: dir, FilesHash: p.FilesHash, AcceptPermissions: p.Permissions}, keyOpts(key))
			if err != nil {
				return packageFailure(s, cmd, err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, res.Raw)
			}
			verb := "Installed"
			if res.Replaced != "" {
				verb = "Replaced " + res.Package.Name + " " + res.Replaced + ":"
			}
			fmt.Fprintf(s.Out, "%s %s %s (%s).\n", verb, res.Package.Name, res.Package.Version, res.Package.State)
			if res.Package.Problem != nil {
				fmt.Fprintf(s.Out, "It does not run: %s: %s\n", res.Package.Problem.Code, res.Package.Problem.Message)
			}
			fmt.Fprintf(s.Out, "Enable it where it should act with extensions.%s in the configuration (open-conduit config set).\n", res.Package.Name)
			return nil
		},
	}
	cmd.Flags().BoolVar(&accept, "accept-permissions", false, "accept the permissions the package asks for without asking")
	keyFlag(cmd, &key)
	return cmd
}

// packageFailure prints an invalid package's diagnostics (as text) before
// the refusal.
func packageFailure(s Streams, cmd *cobra.Command, err error, t target) error {
	if diags := client.Diagnostics(err); len(diags) > 0 && !wantJSON(cmd) {
		for _, d := range diags {
			fmt.Fprintf(s.Out, "%s: %s\n", "open-conduit-package.json"+d.Pointer, d.Code+": "+d.Remedy)
		}
		return failf("not installed: the package does not check (%d problems above); fix them and install again", len(diags))
	}
	return clientFailure(err, t)
}

func newPackagesRemoveCmd(s Streams) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Stop and remove an installed package (admin)",
		Long: `Stop the package's process and remove its files from the state directory.
It is refused while the active configuration refers to the package
(extensions.<name>, a grant of its operations or toolsets, a binding on its
executor): change the configuration first. Needs the admin role.`,
		Args: oneArg("package NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			res, err := c.RemovePackage(cmd.Context(), args[0], keyOpts(key))
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, res.Raw)
			}
			fmt.Fprintf(s.Out, "Removed %s %s.\n", res.Name, res.Version)
			return nil
		},
	}
	keyFlag(cmd, &key)
	return cmd
}

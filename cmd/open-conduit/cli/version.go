package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/buildinfo"
)

func init() {
	commands = append(commands, newVersionCmd)
	rootHooks = append(rootHooks, func(root *cobra.Command) {
		root.Version = versionLine(buildinfo.Read())
		root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	})
}

// newVersionCmd prints which build this is: the module version, the
// commit it was built from and the Go toolchain; --json as an object.
// It needs no daemon.
func newVersionCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go toolchain of this build",
		Example: `  open-conduit version
  open-conduit version --json
  open-conduit --version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Read()
			if wantJSON(cmd) {
				b, err := json.Marshal(info)
				if err != nil {
					return err
				}
				return printRaw(s.Out, b)
			}
			_, err := fmt.Fprintln(s.Out, "open-conduit "+versionLine(info))
			return err
		},
	}
}

// versionLine is "VERSION (commit C, modified) GO", leaving out what the
// build did not record.
func versionLine(i buildinfo.Info) string {
	var extra []string
	if i.Commit != "" {
		c := "commit " + i.Commit
		if i.Modified {
			c += ", modified"
		}
		extra = append(extra, c)
	}
	line := i.Version
	if len(extra) > 0 {
		line += " (" + strings.Join(extra, "; ") + ")"
	}
	if i.Go != "" {
		line += " " + i.Go
	}
	return line
}

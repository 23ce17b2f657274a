package oscli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/open-conduit/open-conduit/osclient"
	"github.com/spf13/cobra"
)

func newGuidanceCmd(s Streams) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "guidance [--json]",
		Short: "Print the guidance of the operations this execution may call",
		Long: `Print the agent guidance of this execution's granted operations: the overall
guidance, then each operation with its summary, guidance, the capabilities it
serves and its input schema. --json prints the toolbelt's document as is.`,
		Args: args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client(s)
			if err != nil {
				return err
			}
			defer c.Close()
			g, err := c.Guidance(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(s.Out, g.Raw)
			}
			_, err = s.Out.Write([]byte(renderGuidance(g)))
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the guidance document as JSON")
	return cmd
}

// renderGuidance writes the guidance document as Markdown text.
func renderGuidance(g *osclient.Guidance) string {
	var b strings.Builder
	if text := strings.TrimSpace(g.Guidance); text != "" {
		b.WriteString(text)
		b.WriteString("\n\n")
	}
	if len(g.Operations) == 0 {
		b.WriteString("This execution may call no operations.\n")
		return b.String()
	}
	b.WriteString("## Operations\n")
	for _, op := range g.Operations {
		fmt.Fprintf(&b, "\n### %s\n\n", op.Name)
		if op.Summary != "" {
			b.WriteString(op.Summary + "\n\n")
		}
		if text := strings.TrimSpace(op.Guidance); text != "" {
			b.WriteString(text + "\n\n")
		}
		if len(op.Capabilities) > 0 {
			fmt.Fprintf(&b, "Serves: %s\n\n", strings.Join(op.Capabilities, ", "))
		}
		if schema := bytes.TrimSpace(op.InputSchema); len(schema) > 0 && string(schema) != "null" {
			var ind bytes.Buffer
			if err := json.Indent(&ind, schema, "", "  "); err == nil {
				b.WriteString("Input schema:\n\n```json\n" + ind.String() + "\n```\n")
			}
		}
	}
	return b.String()
}

package cli

import (
	"testing"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/client"
)

func TestRunUsageShowsAnAgentsTokensAndCost(t *testing.T) {
	for _, c := range []struct {
		usage *api.Usage
		want  string
	}{
		{nil, "-"},
		{&api.Usage{InputTokens: 1205, OutputTokens: 340}, "1205 in/340 out"},
		{&api.Usage{InputTokens: 7, OutputTokens: 2, CostUSD: 0.125}, "7 in/2 out $0.1250"},
	} {
		var r client.Run
		r.Execution.Usage = c.usage
		if got := runUsage(r); got != c.want {
			t.Errorf("runUsage(%+v) = %q, want %q", c.usage, got, c.want)
		}
	}
}

package shell

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/internal/executor"
)

// defaultPath is the command's PATH when the daemon has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// environment builds the command's environment, and only from what is named
// here: PATH, HOME and LANG from the daemon, the binding's env, the resolved
// secrets, the toolbelt endpoint and token file, and the execution's ids.
// Later entries win over earlier ones; the host's own names cannot be set by
// the binding or a secret. The token itself is never part of it.
func environment(cfg Config, req executor.RunRequest) ([]string, error) {
	env := map[string]string{}
	for _, name := range []string{"PATH", "HOME", "LANG"} {
		if v, ok := os.LookupEnv(name); ok {
			env[name] = v
		}
	}
	if env["PATH"] == "" {
		env["PATH"] = defaultPath
	}
	for name, v := range cfg.Env {
		env[name] = v
	}
	for name, v := range req.Env {
		if !envName.MatchString(name) || reservedEnv(name) || strings.IndexByte(v, 0) >= 0 {
			// Name only: the value is a secret.
			return nil, fmt.Errorf("secret environment variable %q cannot be set: use letters, digits and underscores, not a name the host reserves (OS_ENDPOINT, OS_TOKEN_FILE, OPEN_CONDUIT_*), and no NUL byte in the value", name)
		}
		env[name] = v
	}
	if dir := req.Context.ToolbeltDir; dir != "" {
		env["PATH"] = dir + string(os.PathListSeparator) + env["PATH"]
	}
	if req.Context.ToolbeltEndpoint != "" {
		env["OS_ENDPOINT"] = req.Context.ToolbeltEndpoint
		if req.Context.ToolbeltTokenFile != "" {
			env["OS_TOKEN_FILE"] = req.Context.ToolbeltTokenFile
		}
	}
	env["OPEN_CONDUIT_EXECUTION_ID"] = req.ExecutionID
	env["OPEN_CONDUIT_WORK_ID"] = req.WorkID
	env["OPEN_CONDUIT_SCOPE_ID"] = req.ScopeID

	list := make([]string, 0, len(env))
	for name, v := range env {
		list = append(list, name+"="+v)
	}
	slices.Sort(list)
	return list, nil
}

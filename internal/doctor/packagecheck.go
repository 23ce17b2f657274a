package doctor

import (
	"context"
	"fmt"

	"github.com/open-conduit/open-conduit/client"
)

// The finding codes of the installed packages.
const (
	CodePackagesRunning    = "packages_running"
	CodePackageChanged     = "package_changed"
	CodePackageUnavailable = "package_unavailable"
	CodePackageCrashLoop   = "package_crash_loop"
	CodePackagesUnlisted   = "packages_unlisted"
)

// packageLister is a Daemon that lists the installed packages
// (*client.Client is one).
type packageLister interface {
	Packages(ctx context.Context) (*client.List[client.Package], error)
}

// checkPackages reports the installed packages of a daemon that answered
// that do not run as they should: changed files, a package that could
// not be started, a process in a crash loop.
func (r *run) checkPackages(ctx context.Context) {
	if !r.daemonUp {
		return
	}
	pl, ok := r.opts.Daemon.(packageLister)
	if !ok {
		return
	}
	ctx, cancel := r.withTimeout(ctx, daemonRequestDeadline)
	defer cancel()
	l, err := pl.Packages(ctx)
	if err != nil {
		r.add(SeverityWarning, CodePackagesUnlisted, "the daemon did not list its installed packages ("+errText(err)+"), so they are not checked", "open-conduit packages list")
		return
	}
	bad := 0
	for _, p := range l.Items {
		if p.Problem == nil {
			continue
		}
		bad++
		switch p.Problem.Code {
		case CodePackageChanged:
			r.add(SeverityError, CodePackageChanged, fmt.Sprintf("package %s: its installed files changed since it was installed, so it does not run", p.Name),
				"open-conduit packages install DIR (the package's directory), or open-conduit packages remove "+p.Name)
		case CodePackageCrashLoop:
			r.add(SeverityError, CodePackageCrashLoop, fmt.Sprintf("package %s: its process keeps crashing (%d restarts); the daemon keeps restarting it with a growing backoff", p.Name, p.Restarts),
				"open-conduit packages show "+p.Name)
		default:
			r.add(SeverityError, CodePackageUnavailable, fmt.Sprintf("package %s does not run: %s", p.Name, p.Problem.Message),
				"open-conduit packages show "+p.Name)
		}
	}
	if bad == 0 && len(l.Items) > 0 {
		r.add(SeverityOK, CodePackagesRunning, fmt.Sprintf("%d installed packages, none in trouble", len(l.Items)), "")
	}
}

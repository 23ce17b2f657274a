package management

import (
	"context"
	"errors"
	"net/http"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/packages"
)

// The package routes: the installed packages, listed and shown (view),
// inspected, installed and removed (admin: a package runs code as the
// daemon's user and is given the permissions it asks for).

// PackageControls install, remove and list the installed packages; the
// daemon's package host implements them. Their errors wrap the sentinels
// of package extension with a safe message, or are a
// *packages.InvalidError.
type PackageControls interface {
	List(ctx context.Context) ([]api.Package, error)
	Get(ctx context.Context, name string) (api.Package, error)
	Inspect(ctx context.Context, req api.InspectPackageRequest) (api.PackageInspection, error)
	Install(ctx context.Context, req api.InstallPackageRequest) (api.InstalledPackage, error)
	Remove(ctx context.Context, name string) (api.RemovedPackage, error)
}

type packageRoutes struct{ c PackageControls }

// packageRouteTable is the packages' part of the route table.
func packageRouteTable(c PackageControls) []Route {
	pr := packageRoutes{c: c}
	return []Route{
		{Method: "GET", Pattern: "/v1/packages", Role: RoleView, Handler: pr.list},
		{Method: "GET", Pattern: "/v1/packages/{name}", Role: RoleView, Handler: pr.get},
		{Method: "POST", Pattern: "/v1/packages/inspect", Role: RoleAdmin, Handler: pr.inspect},
		{Method: "POST", Pattern: "/v1/packages", Role: RoleAdmin, Idempotent: true, Handler: pr.install},
		{Method: "POST", Pattern: "/v1/packages/{name}/remove", Role: RoleAdmin, Idempotent: true, Handler: pr.remove},
	}
}

func (pr packageRoutes) list(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	items, err := pr.c.List(r.Context())
	if err != nil {
		return nil, packageError(err)
	}
	return api.Page[api.Package]{Items: items}, nil
}

func (pr packageRoutes) get(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	p, err := pr.c.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		return nil, packageError(err)
	}
	return p, nil
}

func (pr packageRoutes) inspect(r *http.Request) (any, error) {
	var req api.InspectPackageRequest
	if err := httpapi.DecodeBody(r, &req); err != nil {
		return nil, err
	}
	out, err := pr.c.Inspect(r.Context(), req)
	if err != nil {
		return nil, packageError(err)
	}
	return out, nil
}

func (pr packageRoutes) install(r *http.Request) (any, error) {
	var req api.InstallPackageRequest
	if err := httpapi.DecodeBody(r, &req); err != nil {
		return nil, err
	}
	out, err := pr.c.Install(r.Context(), req)
	if err != nil {
		return nil, packageError(err)
	}
	return out, nil
}

func (pr packageRoutes) remove(r *http.Request) (any, error) {
	var req struct{}
	if err := httpapi.DecodeBody(r, &req); err != nil {
		return nil, err
	}
	out, err := pr.c.Remove(r.Context(), r.PathValue("name"))
	if err != nil {
		return nil, packageError(err)
	}
	return out, nil
}

// packageError maps the package host's refusals to the envelope, keeping
// their messages (written from names only); anything else is the
// server's 500.
func packageError(err error) error {
	var ie *packages.InvalidError
	if errors.As(err, &ie) {
		out := &httpapi.Error{Code: httpapi.CodeInvalidPackage, Err: err,
			Message: "the package does not check (see diagnostics); fix its manifest or files and install it again"}
		for _, d := range ie.Diagnostics {
			out.Diagnostics = append(out.Diagnostics, api.Diagnostic{Pointer: d.Pointer, Code: d.Code, Remedy: d.Remedy})
		}
		return out
	}
	for _, m := range []struct {
		err  error
		code httpapi.Code
	}{
		{extension.ErrNotFound, httpapi.CodeNotFound},
		{extension.ErrConflict, httpapi.CodeConflict},
		{extension.ErrInvalid, httpapi.CodeInvalidRequest},
	} {
		if errors.Is(err, m.err) {
			return httpapi.Wrap(m.code, err, safeMessage(err, m.err))
		}
	}
	return err
}

// safeMessage is err's text without the sentinel's own prefix.
func safeMessage(err, sentinel error) string {
	msg := err.Error()
	prefix := sentinel.Error() + ": "
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return msg[len(prefix):]
	}
	return msg
}

package client

import (
	"context"

	"github.com/open-conduit/open-conduit/api"
)

// The installed packages (docs/api.md, Packages; docs/packages.md).

// Package is an installed package.
type Package = api.Package

// PackageInspection is what a package directory holds, checked, before it
// is installed.
type PackageInspection struct {
	api.PackageInspection
	Mutation `json:"-"`
}

// InstallPackageRequest says what is installed: the directory, the files
// hash the operator was shown and the permissions accepted.
type InstallPackageRequest = api.InstallPackageRequest

// InstalledPackage is the answer of an install.
type InstalledPackage struct {
	api.InstalledPackage
	Mutation `json:"-"`
}

// RemovedPackage is the answer of a remove.
type RemovedPackage struct {
	api.RemovedPackage
	Mutation `json:"-"`
}

// Packages lists the installed packages, in name order (one page).
func (c *Client) Packages(ctx context.Context) (*List[Package], error) {
	return list[Package](ctx, c, "/v1/packages")
}

// PackageGet is one installed package, with the raw body.
type PackageGet struct {
	api.Package
	Read `json:"-"`
}

// Package returns one installed package.
func (c *Client) Package(ctx context.Context, name string) (*PackageGet, error) {
	var out PackageGet
	rd, err := get(ctx, c, "/v1/packages/"+PathEscape(name), nil, &out)
	out.Read = rd
	return &out, err
}

// InspectPackage checks the package directory dir (an absolute path on
// the daemon's machine) and says what it provides and the permissions it
// asks for; it installs nothing.
func (c *Client) InspectPackage(ctx context.Context, dir string) (*PackageInspection, error) {
	var out PackageInspection
	m, err := post(ctx, c, "/v1/packages/inspect", api.InspectPackageRequest{Dir: dir}, nil, false, &out)
	out.Mutation = m
	return &out, err
}

// InstallPackage installs (or replaces) a package. It sends
// opts.IdempotencyKey, or a fresh key.
func (c *Client) InstallPackage(ctx context.Context, req InstallPackageRequest, opts *RequestOptions) (*InstalledPackage, error) {
	var out InstalledPackage
	m, err := post(ctx, c, "/v1/packages", req, opts, true, &out)
	out.Mutation = m
	return &out, err
}

// RemovePackage stops and removes an installed package. It sends
// opts.IdempotencyKey, or a fresh key.
func (c *Client) RemovePackage(ctx context.Context, name string, opts *RequestOptions) (*RemovedPackage, error) {
	var out RemovedPackage
	m, err := post(ctx, c, "/v1/packages/"+PathEscape(name)+"/remove", struct{}{}, opts, true, &out)
	out.Mutation = m
	return &out, err
}

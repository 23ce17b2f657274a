package doctor_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Every finding code the package declares (its Code… constants) is
// documented in docs/cli.md, and none is declared twice.
func TestEveryCodeIsDocumented(t *testing.T) {
	docs, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(docs), "\n## doctor\n")
	if !ok {
		t.Fatal("docs/cli.md has no doctor section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						code, _ := strconv.Unquote(lit.Value)
						if other, dup := seen[code]; dup {
							t.Errorf("%s and %s are both %q", other, name.Name, code)
						}
						seen[code] = name.Name
						if !strings.Contains(section, "`"+code+"`") {
							t.Errorf("code %s (%s) is not in docs/cli.md's doctor section", code, name.Name)
						}
					}
				}
			}
		}
	}
	if len(seen) < 40 {
		t.Fatalf("found only %d codes: the walk is broken", len(seen))
	}
}

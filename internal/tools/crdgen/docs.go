package crdgen

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
)

// Docs holds the doc comments of a package's types and of their fields,
// read from its source: the descriptions of the schema.
type Docs struct {
	pkgPath string
	types   map[string]string
	fields  map[string]map[string]string
}

// Type returns the doc comment of t, a type of the package; "" for other
// packages' types and undocumented ones.
func (d *Docs) Type(t reflect.Type) string {
	if d == nil || t.PkgPath() != d.pkgPath {
		return ""
	}
	return d.types[t.Name()]
}

// Field returns the doc comment of field (its Go name) of t, else its line
// comment; "" when it has neither.
func (d *Docs) Field(t reflect.Type, field string) string {
	if d == nil || t.PkgPath() != d.pkgPath {
		return ""
	}
	return d.fields[t.Name()][field]
}

// SourceDir returns the directory of the package pkgPath in the current
// module, as `go list` finds it.
func SourceDir(ctx context.Context, pkgPath string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "list", "-f", "{{.Dir}}", pkgPath)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go list %s: %w: %s", pkgPath, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// ReadDocs parses the Go files of dir (tests left out), the source of the
// package pkgPath, and keeps its type and field doc comments.
func ReadDocs(dir, pkgPath string) (*Docs, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, fmt.Errorf("read docs: %w", err)
	}
	d := &Docs{pkgPath: pkgPath, types: map[string]string{}, fields: map[string]map[string]string{}}
	fset := token.NewFileSet()
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read docs: %w", err)
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("read docs: %w", err)
		}
		d.add(f)
	}
	if len(d.types) == 0 {
		return nil, fmt.Errorf("read docs: no documented type in %s", dir)
	}
	return d, nil
}

func (d *Docs) add(f *ast.File) {
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			doc := ts.Doc
			if doc == nil && len(gd.Specs) == 1 {
				doc = gd.Doc
			}
			d.types[ts.Name.Name] = text(doc)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			fields := map[string]string{}
			for _, fl := range st.Fields.List {
				c := text(fl.Doc)
				if c == "" {
					c = text(fl.Comment)
				}
				names := fl.Names
				if len(names) == 0 { // embedded: named after its type
					names = []*ast.Ident{embeddedName(fl.Type)}
				}
				for _, n := range names {
					if n != nil && c != "" {
						fields[n.Name] = c
					}
				}
			}
			d.fields[ts.Name.Name] = fields
		}
	}
}

func embeddedName(e ast.Expr) *ast.Ident {
	switch t := e.(type) {
	case *ast.Ident:
		return t
	case *ast.StarExpr:
		return embeddedName(t.X)
	case *ast.SelectorExpr:
		return t.Sel
	}
	return nil
}

// text is a comment's text with its line breaks, trimmed.
func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.TrimSpace(g.Text())
}

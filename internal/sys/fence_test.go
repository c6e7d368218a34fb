package sys

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportFence keeps unsafe, and io_uring system calls through
// golang.org/x/sys/unix, inside internal/sys. It is the same rule as the
// depguard configuration in .golangci.yaml, checked without the linter so
// that plain `go test` enforces it.
func TestImportFence(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bench-report") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		inSys := strings.HasPrefix(filepath.ToSlash(rel), "internal/sys/")
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		unixName := ""
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch p {
			case "unsafe":
				if !inSys {
					t.Errorf("%s imports unsafe; only internal/sys may", rel)
				}
			case "golang.org/x/sys/unix":
				unixName = "unix"
				if imp.Name != nil {
					unixName = imp.Name.Name
				}
			}
		}
		if inSys || unixName == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == unixName {
				s := sel.Sel.Name
				if strings.HasPrefix(s, "IORING_") || strings.HasPrefix(s, "SYS_IO_URING") || strings.HasPrefix(s, "IOSQE_") {
					t.Errorf("%s: uses unix.%s; io_uring ABI belongs in internal/sys", fset.Position(sel.Pos()), s)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no Go files found; the walk root is wrong")
	}
}

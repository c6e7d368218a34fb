package sys

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestDocComments holds the io_uring packages to the house style: every
// exported identifier has a doc comment, and every exported method says from
// which goroutine it may be called. All build variants (linux and stubs) are
// read.
func TestDocComments(t *testing.T) {
	for _, dir := range []string{".", "../../uring"} {
		fset := token.NewFileSet()
		//lint:ignore SA1019 every build variant is wanted here, which is what ParseDir's ignoring of build tags gives
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if len(pkgs) != 1 {
			t.Fatalf("%s: %d packages", dir, len(pkgs))
		}
		for _, p := range pkgs {
			files := make([]*ast.File, 0, len(p.Files))
			for _, f := range p.Files {
				files = append(files, f)
			}
			d, err := doc.NewFromFiles(fset, files, "x", doc.AllDecls|doc.PreserveAST)
			if err != nil {
				t.Fatal(err)
			}
			checkDocs(t, dir, d)
		}
	}
}

func checkDocs(t *testing.T, dir string, d *doc.Package) {
	t.Helper()
	need := func(name, text string) {
		if ast.IsExported(name) && strings.TrimSpace(text) == "" {
			t.Errorf("%s: %s has no doc comment", dir, name)
		}
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, n := range v.Names {
				if v.Doc == "" {
					need(n, lineComment(v.Decl, n))
				}
			}
		}
	}
	values(d.Consts)
	values(d.Vars)
	for _, f := range d.Funcs {
		need(f.Name, f.Doc)
	}
	for _, ty := range d.Types {
		if !ast.IsExported(ty.Name) {
			continue
		}
		need(ty.Name, ty.Doc)
		values(ty.Consts)
		values(ty.Vars)
		for _, f := range ty.Funcs {
			need(f.Name, f.Doc)
		}
		for _, m := range ty.Methods {
			if !ast.IsExported(m.Name) {
				continue
			}
			need(ty.Name+"."+m.Name, m.Doc)
			if m.Doc != "" && !strings.Contains(strings.ToLower(m.Doc), "goroutine") {
				t.Errorf("%s: %s.%s does not say from which goroutine it may be called", dir, ty.Name, m.Name)
			}
		}
	}
}

// lineComment returns the trailing or leading comment of name's spec in a
// grouped declaration (a constant in a block documented line by line).
func lineComment(decl *ast.GenDecl, name string) string {
	for _, s := range decl.Specs {
		vs, ok := s.(*ast.ValueSpec)
		if !ok {
			continue
		}
		for _, n := range vs.Names {
			if n.Name == name {
				return vs.Doc.Text() + vs.Comment.Text()
			}
		}
	}
	return ""
}

// TestStubParity keeps the non-Linux stubs of package uring in step with the
// Linux API: every exported function, and exported method of an exported
// type, of a *_linux.go file exists in the files built elsewhere, so
// portable callers compile everywhere. A method of an unexported type
// (probeVerdict.Unwrap, for errors.As) is no caller's API.
func TestStubParity(t *testing.T) {
	linux, other := map[string]bool{}, map[string]bool{}
	eachUringFunc(t, func(isLinux bool, fd *ast.FuncDecl) {
		if !fd.Name.IsExported() {
			return
		}
		key := fd.Name.Name
		if fd.Recv != nil {
			recv := recvName(fd)
			if !ast.IsExported(recv) {
				return
			}
			key = recv + "." + key
		}
		set := other
		if isLinux {
			set = linux
		}
		set[key] = true
	})
	if len(linux) == 0 {
		t.Fatal("no exported functions in uring/*_linux.go")
	}
	for k := range linux {
		if !other[k] {
			t.Errorf("uring.%s has no stub outside Linux", k)
		}
	}
}

// TestStubGoroutineMatchesLinux keeps the goroutine the non-Linux stubs of
// package uring name for each method the same as the Linux method's: a
// caller reading the documentation built for another system (pkg.go.dev
// with GOOS=darwin, say) learns the same contract. A method says "any
// goroutine" or it is the owner's (the package documentation's rule).
func TestStubGoroutineMatchesLinux(t *testing.T) {
	// linux and other map "Type.Method" to whether its doc says any
	// goroutine may call it.
	linux, other := map[string]bool{}, map[string]bool{}
	eachUringFunc(t, func(isLinux bool, fd *ast.FuncDecl) {
		if fd.Recv == nil || !fd.Name.IsExported() {
			return
		}
		set := other
		if isLinux {
			set = linux
		}
		doc := strings.Join(strings.Fields(strings.ToLower(fd.Doc.Text())), " ")
		set[recvName(fd)+"."+fd.Name.Name] = strings.Contains(doc, "any goroutine")
	})
	who := map[bool]string{true: "any goroutine", false: "the owner goroutine"}
	for _, k := range slices.Sorted(maps.Keys(linux)) {
		if stub, ok := other[k]; ok && stub != linux[k] {
			t.Errorf("uring.%s is for %s on Linux, but its stub says %s", k, who[linux[k]], who[stub])
		}
	}
}

// eachUringFunc parses package uring (comments too) and calls fn with each
// function declaration of its files built for Linux (*_linux.go, isLinux
// true) and of its stubs built elsewhere (*_other.go); files built
// everywhere are skipped.
func eachUringFunc(t *testing.T, fn func(isLinux bool, fd *ast.FuncDecl)) {
	t.Helper()
	fset := token.NewFileSet()
	//lint:ignore SA1019 every build variant is wanted here, which is what ParseDir's ignoring of build tags gives
	pkgs, err := parser.ParseDir(fset, "../../uring", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for name, f := range p.Files {
			isLinux := strings.HasSuffix(name, "_linux.go")
			if !isLinux && !strings.HasSuffix(name, "_other.go") {
				continue
			}
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					fn(isLinux, fd)
				}
			}
		}
	}
}

// recvName returns the name of method fd's receiver type, its pointer
// taken off.
func recvName(fd *ast.FuncDecl) string {
	typ := fd.Recv.List[0].Type
	if st, ok := typ.(*ast.StarExpr); ok {
		typ = st.X
	}
	return typ.(*ast.Ident).Name
}

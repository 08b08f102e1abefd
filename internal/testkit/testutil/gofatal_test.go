package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestNoFatalOffTestGoroutine keeps the rule that t.Fatal and its kin run
// only on the test's own goroutine. FailNow (which Fatal, Fatalf, Skip,
// Skipf and SkipNow call) stops the goroutine that calls it, so on any
// other goroutine it leaves the test running without the check it meant
// to make, and after the test has ended it panics ("Fail in goroutine
// after TestX has completed") and takes the whole test binary down.
//
// It type-checks every package of the module, and of the modules nested in
// it at their directory's path (otelkl), tests included, and fails
// for each call of one of those methods of the testing package's T, B, F
// or TB made, directly or through the module's own functions, methods and
// function values, by code that runs on a goroutine other than the
// test's: a function launched with go, passed to a Go method
// (sync.WaitGroup.Go), time.AfterFunc or b.RunParallel, or an HTTP
// handler function. Such code reports with t.Error and returns, or sends
// its error to the test's goroutine. TestFatalCheckFinds shows what it
// finds and what it does not.
//
// What it cannot see: a function value it cannot trace to the module's
// code (a parameter, an interface method) and code the library itself runs
// on its goroutines (handlers, hooks, a test's store wrapper); none of the
// tests' calls Fatal today.
func TestNoFatalOffTestGoroutine(t *testing.T) {
	t.Parallel()
	Slow(t)
	root, err := findRoot()
	if err != nil {
		t.Fatal(err)
	}
	found, err := offGoroutineFatals(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if why, ok := fatalExceptions[f.in]; ok {
			t.Logf("%s\n\t(left as it is: %s)", f, why)
			continue
		}
		t.Error(f)
	}
}

// fatalExceptions are the fatal calls, by file and function, the check
// reports but this repository cannot change where they are, with why.
var fatalExceptions = map[string]string{
	"internal/testkit/sim/dynamo_test.go put": "the sim's tests are being rewritten elsewhere; " +
		"(*dynWorld).put, on the producer goroutine of (*dynWorld).run, should report with t.Error and return",
	"kinesisleasetest/harness.go HandleRaw": "public harness code, not test code; HandleRaw, which its doc says to " +
		"use off the test's goroutine, fails with Fatalf only on a nil RecordOption, which TestConcurrentHandle does not pass",
}

// TestFatalCheckFinds runs the check over a small module with a fatal
// call on each kind of goroutine and through each kind of indirection,
// and calls that are allowed, and wants exactly the former.
func TestFatalCheckFinds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("help/help.go", `package help

import "testing"

// Must is a helper in another package of the module.
func Must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("%v", err) // WANT via help.Must
	}
}

// Report is one that does not stop the test.
func Report(tb testing.TB, err error) {
	if err != nil {
		tb.Error(err)
	}
}
`)
	write("p/helpers_test.go", `package p

import "testing"

func put(t *testing.T, n int) {
	if n < 0 {
		t.Fatal("negative") // WANT via put
	}
}

func putTwice(t *testing.T) { put(t, 1); put(t, 2) }

type fixture struct {
	t     testing.TB
	check func()
}

func (f *fixture) need(ok bool) {
	if !ok {
		f.t.FailNow() // WANT via need
	}
}

// fake is a testing.TB whose Fatalf does not stop the goroutine.
type fake struct {
	testing.TB
	msgs []string
}

func (f *fake) Fatalf(format string, args ...any) { f.msgs = append(f.msgs, format) }
`)
	write("p/p_test.go", `package p

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"example.com/m/help"
)

func TestDirect(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Fatal("boom") // WANT direct
	}()
	<-done
}

func TestHelpers(t *testing.T) {
	var wg sync.WaitGroup
	wg.Go(func() { put(t, 1) })
	wg.Go(func() { putTwice(t) })
	wg.Go(func() { help.Must(t, nil) })
	wg.Go(func() { help.Report(t, nil) })
	f := &fixture{t: t, check: func() { t.Skip("field") }} // WANT via check
	wg.Go(func() { f.need(true); f.check() })
	wg.Wait()
}

func TestLocalFunc(t *testing.T) {
	check := func() { t.Fatalf("local") } // WANT via check
	check()                               // on the test's goroutine: fine
	done := make(chan struct{})
	go func() { defer close(done); check() }()
	<-done
	time.AfterFunc(time.Millisecond, func() { t.SkipNow() }) // WANT AfterFunc
}

func TestNamed(t *testing.T) {
	done := make(chan struct{})
	go putTwice(t)
	go func() { defer close(done); t.Error("fine") }()
	<-done
}

func TestAllowed(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Run("sub", func(t *testing.T) { t.Fatal("a subtest's own goroutine") })
		f := &fake{TB: t}
		f.Fatalf("a fake")
	}()
	<-done
	t.Fatal("the test's goroutine")
}

func TestHandler(t *testing.T) {
	_ = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Fatalf("handler") // WANT handler
	})
}

func BenchmarkParallel(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			b.Fatal("parallel") // WANT RunParallel
		}
	})
}
`)
	found, err := offGoroutineFatals(dir)
	if err != nil {
		t.Fatal(err)
	}
	// want: the line of every call marked WANT.
	want := map[string]int{}
	putAt := ""
	for _, name := range []string{"help/help.go", "p/helpers_test.go", "p/p_test.go"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "// WANT") {
				want[fmt.Sprintf("%s:%d", name, i+1)] = 0
			}
			if strings.Contains(line, "// WANT via put") {
				putAt = fmt.Sprintf("%s:%d", name, i+1)
			}
		}
	}
	got := map[string]int{}
	var lines []string
	for _, f := range found {
		got[f.at]++
		lines = append(lines, f.String())
	}
	if i := slices.IndexFunc(found, func(f finding) bool { return f.at == putAt }); i >= 0 && found[i].in != "p/helpers_test.go put" {
		t.Errorf("put's Fatal is in %q, want %q", found[i].in, "p/helpers_test.go put")
	}
	for at := range want {
		if got[at] == 0 {
			t.Errorf("%s: not found", at)
		}
	}
	for at := range got {
		if _, ok := want[at]; !ok {
			t.Errorf("%s: found, but allowed", at)
		}
	}
	// put's Fatal is reached from three goroutine starts: wg.Go with put,
	// wg.Go with putTwice, and go putTwice.
	if n := got[putAt]; n != 3 {
		t.Errorf("put's Fatal found %d times, want 3 (one per goroutine start)", n)
	}
	if t.Failed() {
		t.Logf("found:\n%s", strings.Join(lines, "\n"))
	}
}

// fatalMethods are the testing methods that call FailNow or SkipNow.
var fatalMethods = map[string]bool{"Fatal": true, "Fatalf": true, "FailNow": true, "Skip": true, "Skipf": true, "SkipNow": true}

// A finding is a fatal call reached from a goroutine start.
type finding struct {
	at   string // the call, file:line (relative to the module's root)
	in   string // the file and the function the call is in ("" for a function literal)
	call string // the method called, as written: t.Fatal
	from string // the goroutine start: "go at file:line"
	via  []step // the functions called on the way
}

type step struct{ name, at string }

func (f finding) String() string {
	s := fmt.Sprintf("%s: %s on a goroutine other than the test's (%s", f.at, f.call, f.from)
	for i, v := range f.via {
		if i == 0 {
			s += ", via "
		} else {
			s += ", "
		}
		s += fmt.Sprintf("%s at %s", v.name, v.at)
	}
	return s + "); report with t.Error and return, or send the error to the test's goroutine"
}

// offGoroutineFatals checks the module in root (see
// TestNoFatalOffTestGoroutine) and returns a finding per fatal call and
// goroutine start that reaches it, sorted.
func offGoroutineFatals(root string) ([]finding, error) {
	m, err := loadModule(root)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var found []finding
	for _, u := range m.scanned {
		for _, f := range u.files {
			for _, r := range u.roots(f) {
				for _, hit := range m.reach(r) {
					if k := hit.at + " " + hit.from; !seen[k] {
						seen[k] = true
						found = append(found, hit)
					}
				}
			}
		}
	}
	slices.SortFunc(found, func(a, b finding) int { return strings.Compare(a.String(), b.String()) })
	return found, nil
}

// A module is the packages of a Go module, parsed and type-checked with
// the standard library's export data; packages from other modules are
// empty stand-ins (the check follows only the module's own code, so an
// expression of their types is just left untyped).
type module struct {
	root, path string
	fset       *token.FileSet
	dirs       map[string]*dirFiles // by import path
	std        types.Importer
	stubs      map[string]*types.Package
	libs       map[string]*unit // checked non-test packages, by import path
	checking   map[string]bool
	scanned    []*unit // the units whose files are searched for goroutines
	decls      map[types.Object]declIn
	funcVals   map[types.Object][]litIn // function literals assigned to a variable or field
}

type dirFiles struct {
	path               string
	lib, inTest, xTest []*ast.File
}

// A unit is one type-checked package: a directory's non-test files, or
// those and its in-package test files, or its external test files.
type unit struct {
	m     *module
	files []*ast.File
	info  *types.Info
	pkg   *types.Package
}

type declIn struct {
	decl *ast.FuncDecl
	u    *unit
}

type litIn struct {
	lit *ast.FuncLit
	u   *unit
}

func loadModule(root string) (*module, error) {
	modPath, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	m := &module{
		root: root, path: modPath, fset: token.NewFileSet(),
		dirs: map[string]*dirFiles{}, stubs: map[string]*types.Package{},
		libs: map[string]*unit{}, checking: map[string]bool{},
		decls: map[types.Object]declIn{}, funcVals: map[types.Object][]litIn{},
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" || name == "vendor") {
			return filepath.SkipDir
		}
		if path != root {
			if p, err := modulePath(filepath.Join(path, "go.mod")); err == nil {
				// A module of the repository at its directory's path
				// (otelkl) is checked with the root's; another is skipped.
				rel, _ := filepath.Rel(root, path)
				if p != modPath+"/"+filepath.ToSlash(rel) {
					return filepath.SkipDir
				}
			}
		}
		return m.parseDir(path)
	})
	if err != nil {
		return nil, err
	}
	if m.std, err = stdImporter(root, m.fset, m.dirs); err != nil {
		return nil, err
	}
	if _, err := m.std.Import("testing"); err != nil {
		// Without it no call would be recognised and the check would pass.
		return nil, fmt.Errorf("importing the testing package's export data: %w", err)
	}
	paths := make([]string, 0, len(m.dirs))
	for p := range m.dirs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		d := m.dirs[p]
		lib := m.lib(p)
		tested := lib
		if len(d.inTest) > 0 {
			tested = m.check(p, slices.Concat(d.lib, d.inTest), nil)
		}
		if tested != nil {
			m.scanned = append(m.scanned, tested)
		}
		if len(d.xTest) > 0 {
			// The external tests import the package with its in-package
			// test files (export_test.go), as go test builds it.
			m.scanned = append(m.scanned, m.check(p+"_test", d.xTest, map[string]*unit{p: tested}))
		}
	}
	return m, nil
}

// stdImporter returns an importer of the standard library's export data
// for every standard package the files of dirs import, and testing. It
// asks the go command once for all of them (go list -export -deps), where
// importer.ForCompiler's default lookup runs go list once a package: that
// was most of the check's time, tens of seconds on a busy machine.
func stdImporter(root string, fset *token.FileSet, dirs map[string]*dirFiles) (types.Importer, error) {
	want := map[string]bool{"testing": true}
	for _, d := range dirs {
		for _, f := range slices.Concat(d.lib, d.inTest, d.xTest) {
			for _, spec := range f.Imports {
				ip, err := strconv.Unquote(spec.Path.Value)
				if err != nil {
					continue
				}
				if first, _, _ := strings.Cut(ip, "/"); !strings.Contains(first, ".") && ip != "C" && dirs[ip] == nil {
					want[ip] = true
				}
			}
		}
	}
	args := []string{"list", "-e", "-export", "-deps", "-f", "{{if .Export}}{{.ImportPath}}={{.Export}}{{end}}"}
	for ip := range want {
		args = append(args, ip)
	}
	slices.Sort(args[6:])
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export of the standard packages: %v\n%s", err, stderr.Bytes())
	}
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if ip, file, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			exports[ip] = file
		}
	}
	return importer.ForCompiler(fset, "gc", func(ip string) (io.ReadCloser, error) {
		file, ok := exports[ip]
		if !ok {
			return nil, fmt.Errorf("no export data for %q", ip)
		}
		return os.Open(file)
	}), nil
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

func (m *module) parseDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(m.root, dir)
	if err != nil {
		return err
	}
	path := m.path
	if rel != "." {
		path += "/" + filepath.ToSlash(rel)
	}
	d := &dirFiles{path: path}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(m.fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		switch {
		case !strings.HasSuffix(name, "_test.go"):
			d.lib = append(d.lib, f)
		case strings.HasSuffix(f.Name.Name, "_test"):
			d.xTest = append(d.xTest, f)
		default:
			d.inTest = append(d.inTest, f)
		}
	}
	if len(d.lib)+len(d.inTest)+len(d.xTest) > 0 {
		m.dirs[path] = d
	}
	return nil
}

// lib returns the checked non-test package path of the module, or nil if
// the module has none.
func (m *module) lib(path string) *unit {
	if u, ok := m.libs[path]; ok {
		return u
	}
	d := m.dirs[path]
	if d == nil || len(d.lib) == 0 || m.checking[path] {
		return nil
	}
	m.checking[path] = true
	u := m.check(path, d.lib, nil)
	delete(m.checking, path)
	m.libs[path] = u
	return u
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// check type-checks files as package path; over are the units to import
// instead of the module's non-test packages.
func (m *module) check(path string, files []*ast.File, over map[string]*unit) *unit {
	imp := importerFunc(func(ip string) (*types.Package, error) {
		if u := over[ip]; u != nil {
			return u.pkg, nil
		}
		if ip == m.path || strings.HasPrefix(ip, m.path+"/") {
			if u := m.lib(ip); u != nil {
				return u.pkg, nil
			}
		} else if first, _, _ := strings.Cut(ip, "/"); !strings.Contains(first, ".") {
			if p, err := m.std.Import(ip); err == nil {
				return p, nil
			}
		}
		return m.stub(ip), nil
	})
	u := &unit{m: m, files: files, info: &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}}
	conf := types.Config{Importer: imp, Error: func(error) {}, FakeImportC: true}
	u.pkg, _ = conf.Check(path, m.fset, files, u.info) // errors: the stand-ins' types
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if obj := u.info.Defs[n.Name]; obj != nil {
					m.decls[obj] = declIn{n, u}
				}
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i, lhs := range n.Lhs {
						u.noteFuncVal(lhs, n.Rhs[i], false)
					}
				}
			case *ast.ValueSpec:
				if len(n.Names) == len(n.Values) {
					for i, name := range n.Names {
						u.noteFuncVal(name, n.Values[i], false)
					}
				}
			case *ast.KeyValueExpr:
				u.noteFuncVal(n.Key, n.Value, true) // a struct literal's field
			}
			return true
		})
	}
	return u
}

// noteFuncVal records a function literal assigned to the variable or
// field lhs (only a field if field).
func (u *unit) noteFuncVal(lhs, rhs ast.Expr, field bool) {
	lit, ok := ast.Unparen(rhs).(*ast.FuncLit)
	if !ok {
		return
	}
	var id *ast.Ident
	switch l := ast.Unparen(lhs).(type) {
	case *ast.Ident:
		id = l
	case *ast.SelectorExpr:
		id = l.Sel
	default:
		return
	}
	obj := u.info.ObjectOf(id)
	if v, ok := obj.(*types.Var); ok && (v.IsField() || !field) {
		u.m.funcVals[v.Origin()] = append(u.m.funcVals[v.Origin()], litIn{lit, u})
	}
}

func (m *module) stub(path string) *types.Package {
	if p := m.stubs[path]; p != nil {
		return p
	}
	name := path[strings.LastIndex(path, "/")+1:]
	if len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		if i := strings.LastIndex(path[:len(path)-len(name)-1], "/"); i >= 0 {
			name = path[i+1 : len(path)-len(name)-1] // example.com/x/v5 is package x
		}
	}
	name = strings.NewReplacer("-", "_", ".", "_").Replace(name)
	p := types.NewPackage(path, name)
	p.MarkComplete()
	m.stubs[path] = p
	return p
}

// A root is code that runs on a goroutine of its own: a function
// literal, or the module's function or variable a call names.
type root struct {
	u   *unit
	at  token.Pos // where the goroutine starts
	how string    // "go", "Go", ...
	fn  ast.Expr  // the function value that runs: a literal, or the module's function or variable
}

// roots returns the goroutine starts in f.
func (u *unit) roots(f *ast.File) []root {
	var rs []root
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			rs = append(rs, root{u: u, at: n.Pos(), how: "go", fn: n.Call.Fun})
		case *ast.CallExpr:
			if tv, ok := u.info.Types[n.Fun]; ok && tv.IsType() {
				if isNamed(tv.Type, "net/http", "HandlerFunc") && len(n.Args) == 1 {
					rs = append(rs, root{u: u, at: n.Pos(), how: "http.HandlerFunc", fn: n.Args[0]})
				}
				return true
			}
			sel, _ := ast.Unparen(n.Fun).(*ast.SelectorExpr)
			fn, _ := u.callee(n).(*types.Func)
			switch {
			case sel != nil && sel.Sel.Name == "Go" && len(n.Args) == 1 && (fn == nil || fn.Signature().Recv() != nil):
				// sync.WaitGroup.Go, errgroup.Group.Go and the like (an
				// unresolved one is another module's).
				rs = append(rs, root{u: u, at: n.Pos(), how: "Go", fn: n.Args[0]})
			case isFunc(fn, "time", "", "AfterFunc") && len(n.Args) == 2:
				rs = append(rs, root{u: u, at: n.Pos(), how: "time.AfterFunc", fn: n.Args[1]})
			case isFunc(fn, "testing", "B", "RunParallel") && len(n.Args) == 1:
				rs = append(rs, root{u: u, at: n.Pos(), how: "RunParallel", fn: n.Args[0]})
			case (isFunc(fn, "net/http", "", "HandleFunc") || isFunc(fn, "net/http", "ServeMux", "HandleFunc")) && len(n.Args) == 2:
				rs = append(rs, root{u: u, at: n.Pos(), how: "HandleFunc", fn: n.Args[1]})
			}
		}
		return true
	})
	return rs
}

// callee returns the function or variable call calls, or nil.
func (u *unit) callee(call *ast.CallExpr) types.Object {
	fun := ast.Unparen(call.Fun)
	for {
		switch x := fun.(type) {
		case *ast.IndexExpr: // a generic function's instance
			fun = x.X
			continue
		case *ast.IndexListExpr:
			fun = x.X
			continue
		}
		break
	}
	switch f := fun.(type) {
	case *ast.Ident:
		return u.info.Uses[f]
	case *ast.SelectorExpr:
		if s := u.info.Selections[f]; s != nil {
			return s.Obj()
		}
		return u.info.Uses[f.Sel] // a package's function
	}
	return nil
}

func isNamed(t types.Type, pkg, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == pkg && n.Obj().Name() == name
}

// isFunc says whether fn is pkg's function name (recv "") or a method
// name of its type recv.
func isFunc(fn *types.Func, pkg, recv, name string) bool {
	if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != pkg || fn.Name() != name {
		return false
	}
	r := fn.Signature().Recv()
	if recv == "" {
		return r == nil
	}
	if r == nil {
		return false
	}
	t := r.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	return isNamed(t, pkg, recv)
}

// isFatal says whether obj is one of fatalMethods of the testing package
// (on T, B, F, TB or the common type they embed).
func isFatal(obj types.Object) bool {
	fn, ok := obj.(*types.Func)
	return ok && fn.Pkg() != nil && fn.Pkg().Path() == "testing" && fatalMethods[fn.Name()] && fn.Signature().Recv() != nil
}

// reach returns the fatal calls reachable from r.
func (m *module) reach(r root) []finding {
	w := &walk{m: m, r: r, seen: map[ast.Node]bool{}}
	if lit, ok := ast.Unparen(r.fn).(*ast.FuncLit); ok {
		w.node(lit.Body, r.u, nil)
	} else {
		w.value(r.fn, r.u, nil)
	}
	return w.found
}

type walk struct {
	m     *module
	r     root
	seen  map[ast.Node]bool
	found []finding
}

func (m *module) pos(p token.Pos) string {
	at := m.fset.Position(p)
	if rel, err := filepath.Rel(m.root, at.Filename); err == nil {
		at.Filename = filepath.ToSlash(rel)
	}
	return fmt.Sprintf("%s:%d", at.Filename, at.Line)
}

// value follows a function value: a function literal, the module's
// function or method, or a variable or field the module assigns function
// literals to.
func (w *walk) value(e ast.Expr, u *unit, via []step) {
	e = ast.Unparen(e)
	if lit, ok := e.(*ast.FuncLit); ok {
		w.node(lit.Body, u, via)
		return
	}
	var obj types.Object
	switch x := e.(type) {
	case *ast.Ident:
		obj = u.info.Uses[x]
	case *ast.SelectorExpr:
		if s := u.info.Selections[x]; s != nil {
			obj = s.Obj()
		} else {
			obj = u.info.Uses[x.Sel]
		}
	case *ast.IndexExpr, *ast.IndexListExpr:
		obj = u.callee(&ast.CallExpr{Fun: x})
	}
	w.object(obj, via)
}

func (w *walk) object(obj types.Object, via []step) {
	switch o := obj.(type) {
	case *types.Func:
		if d, ok := w.m.decls[o.Origin()]; ok && d.decl.Body != nil {
			w.node(d.decl.Body, d.u, slices.Concat(via, []step{{d.decl.Name.Name, w.m.pos(d.decl.Pos())}}))
		}
	case *types.Var:
		for _, l := range w.m.funcVals[o.Origin()] {
			w.node(l.lit.Body, l.u, slices.Concat(via, []step{{o.Name(), w.m.pos(l.lit.Pos())}}))
		}
	}
}

// node searches body, code that runs on the root's goroutine.
func (w *walk) node(body ast.Node, u *unit, via []step) {
	if w.seen[body] {
		return
	}
	w.seen[body] = true
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		obj := u.callee(call)
		if isFatal(obj) {
			at := w.m.pos(call.Pos())
			f := finding{at: at, call: types.ExprString(call.Fun), from: w.r.how + " at " + w.m.pos(w.r.at), via: via}
			if len(via) > 0 {
				file, _, _ := strings.Cut(at, ":")
				f.in = file + " " + via[len(via)-1].name
			}
			w.found = append(w.found, f)
			return true
		}
		if fn, ok := obj.(*types.Func); ok && fn.Pkg() != nil && fn.Pkg().Path() == "testing" && (fn.Name() == "Run" || fn.Name() == "Cleanup") {
			// A subtest runs on a test goroutine of its own, and a
			// cleanup on the test's.
			return false
		}
		w.object(obj, via)
		return true
	})
}

package leases_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/kinesislease/kinesislease"

// TestImports: the vocabulary package kltype and the encodings package
// leases/driver import only the standard library, and the lease stores
// import, of this module, only packages leases and leases/driver (and codec
// nothing of it), so that a store's dependencies are what a store writer sees.
func TestImports(t *testing.T) {
	for dir, allowed := range map[string][]string{
		"../kltype": nil,
		"driver":    nil,
		".":         {module + "/kltype", module + "/leases/driver"},
		"dynamo":    {module + "/leases", module + "/leases/driver"},
		"memory":    {module + "/leases", module + "/leases/driver"},
		"../codec":  {},
	} {
		for path, file := range imports(t, filepath.Join(".", dir)) {
			if !strings.Contains(strings.Split(path, "/")[0], ".") {
				continue // the standard library
			}
			if strings.HasPrefix(path, module) && !slices.Contains(allowed, path) {
				t.Errorf("%s imports %s: only %v of this module may be imported there", file, path, allowed)
			}
			if dir == "../kltype" || dir == "driver" {
				t.Errorf("%s imports %s: %s imports only the standard library", file, path, dir)
			}
		}
	}
}

// imports returns the import paths of dir's non-test Go files, each with a
// file that imports it.
func imports(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			out[p] = filepath.Join(dir, name)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no imports read", dir)
	}
	return out
}

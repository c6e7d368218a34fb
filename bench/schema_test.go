package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// jsonNames collects the JSON field names of t and of the structs it holds.
func jsonNames(t reflect.Type, seen map[reflect.Type]bool, out map[string]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || t.PkgPath() != reflect.TypeFor[Report]().PkgPath() {
		return
	}
	seen[t] = true
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = t.Name() + "." + f.Name
		jsonNames(f.Type, seen, out)
	}
}

// TestSchemaDocumented checks that docs/BENCH-SCHEMA.md names every JSON
// field of the bench and wakeup reports, so the documented schema cannot
// fall behind the Go types.
func TestSchemaDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/BENCH-SCHEMA.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	seen := map[reflect.Type]bool{}
	jsonNames(reflect.TypeFor[Report](), seen, names)
	jsonNames(reflect.TypeFor[WakeupReport](), seen, names)
	jsonNames(reflect.TypeFor[ProxyReport](), seen, names)
	if len(names) < 50 {
		t.Fatalf("found only %d JSON fields: the walk is broken", len(names))
	}
	for name, field := range names {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/BENCH-SCHEMA.md does not mention `%s` (%s)", name, field)
		}
	}
}

// TestReadReportVersions: ReadReport reads the current schema and version
// 1 (whose machine figures count steal as busy), keeping the version a
// report was written with so a reader can tell them apart, and refuses
// others.
func TestReadReportVersions(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		schema string
		ok     bool
	}{
		{SchemaVersion, true},
		{"spindle-bench/1", true},
		{"spindle-bench/0", false},
		{"", false},
	} {
		path := filepath.Join(dir, "report.json")
		doc := `{"schema":"` + tc.schema + `","kind":"bench","results":[{"arm":"a","machine":{"total_us_per_req":12.5}}]}`
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := ReadReport(path)
		if !tc.ok {
			if err == nil {
				t.Errorf("schema %q read without error", tc.schema)
			}
			continue
		}
		if err != nil {
			t.Errorf("schema %q: %v", tc.schema, err)
			continue
		}
		if rep.Schema != tc.schema || len(rep.Results) != 1 || rep.Results[0].Machine.TotalUSPerReq != 12.5 {
			t.Errorf("schema %q read as %+v", tc.schema, rep)
		}
	}
}

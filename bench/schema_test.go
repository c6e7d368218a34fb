package bench

import (
	"os"
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
	if len(names) < 50 {
		t.Fatalf("found only %d JSON fields: the walk is broken", len(names))
	}
	for name, field := range names {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/BENCH-SCHEMA.md does not mention `%s` (%s)", name, field)
		}
	}
}

package proxy

import (
	"strings"
	"testing"
)

// TestRouteNameLongDefault: a route without a name whose host and path
// prefix together pass maxRouteName (a long path_prefix, which nothing
// bounds) is named route<index>, as one whose default is taken; it was
// named its host and prefix all the same, and the config refused for a
// name it did not give ("routes[0].name: ... longer than 128 bytes").
func TestRouteNameLongDefault(t *testing.T) {
	prefix := "/" + strings.Repeat("x", maxRouteName)
	cfg, err := ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: http, routes: [
  {path_prefix: "` + prefix + `", pool: app},
  {host: "` + strings.Repeat("a", maxRouteName-1) + `", path_prefix: /, pool: app}]}]
pools: [{name: app, servers: ["127.0.0.1:1"]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range cfg.Listeners[0].Routes {
		got = append(got, r.Name)
	}
	if want := []string{"route0", strings.Repeat("a", maxRouteName-1) + "/"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("route names %q, want %q", got, want)
	}
}

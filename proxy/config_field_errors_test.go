package proxy

import (
	"strings"
	"testing"
)

// TestConfigValueErrorsNameField: a value of the wrong kind (a duration
// without its unit, a number too large for its field, a word where true
// or false is wanted, a list where a string is) is refused naming its
// field as well as its line, so that a config written in flow style, a
// listener or pool to a line, says which of the line's fields is wrong.
func TestConfigValueErrorsNameField(t *testing.T) {
	const pool = "pools: [{name: app, servers: [\"127.0.0.1:1\"]}]\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"duration unit", `listeners: [{name: a, listen: ":1", pool: app, connect_timeout: 5s, idle_timeout: 5}]` + "\n" + pool, `line 1: idle_timeout: "5" is not a duration`},
		{"duration overflow", `listeners: [{name: a, listen: ":1", pool: app, idle_timeout: 3000000h}]` + "\n" + pool, `line 1: idle_timeout: "3000000h" is not a duration`},
		{"duration list", `listeners: [{name: a, listen: ":1", pool: app, idle_timeout: [1s]}]` + "\n" + pool, "line 1: idle_timeout: want a duration"},
		{"pool duration", "listeners: [{name: a, listen: \":1\", pool: app}]\npools: [{name: app, servers: [\"127.0.0.1:1\"], health: {interval: 1s, timeout: 1}}]\n", `line 2: timeout: "1" is not a duration`},
		{"int too large", `listeners: [{name: a, listen: ":1", pool: app, max_conns: 99999999999999999999}]` + "\n" + pool, `line 1: max_conns: "99999999999999999999" is not a whole number from`},
		{"int as float too large", `listeners: [{name: a, listen: ":1", pool: app, max_conns: 1e30}]` + "\n" + pool, `line 1: max_conns: "1e30" is not a whole number from`},
		{"int word", "listeners: [{name: a, listen: \":1\", pool: app}]\npools: [{name: app, servers: [\"127.0.0.1:1\"], max_idle: many}]\n", `line 2: max_idle: "many" is not a whole number from`},
		{"uint negative", `listeners: [{name: a, listen: ":1", pool: app, mode: http, h2c: true, h2_initial_window: -1}]` + "\n" + pool, `line 1: h2_initial_window: "-1" is not a whole number from 0 to 4294967295`},
		{"cpu word", "engine: {cpus: [one]}\n" + `listeners: [{name: a, listen: ":1", pool: app}]` + "\n" + pool, `line 1: cpus: "one" is not a whole number`},
		{"bool word", `listeners: [{name: a, listen: ":1", pool: app, mode: http, abort_on_close: yes please}]` + "\n" + pool, `line 1: abort_on_close: "yes please" is not true or false`},
		{"string list", `listeners: [{name: a, listen: [":1"], pool: app}]` + "\n" + pool, "line 1: listen: want a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/proxy"
)

// TestProxyCheck: -check prints the config with its defaults, as a config
// that parses back to the same.
func TestProxyCheck(t *testing.T) {
	out, err := spindleCmd("proxy", "-check", "-config", "testdata/proxy.yaml").Output()
	if err != nil {
		t.Fatalf("spindle proxy -check: %v", err)
	}
	want, err := proxy.LoadConfig("testdata/proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := proxy.ParseConfig(out)
	if err != nil {
		t.Fatalf("printed config does not parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("printed config parses to %+v, want %+v", got, want)
	}
	for _, s := range []string{"connect_timeout: 2s", "balance: least-conn", "write_high_water: 262144", "rise: 2", "- localhost:18082", "passive:\n      fails: 2\n      cooldown: 5s",
		"mode: http", "path_prefix: /", "request_timeout: 10s", "response_timeout: 1m0s", "keepalive_timeout: 1m0s", "max_idle: 4", "max_idle: 16", "idle_timeout: 1m0s", "max_request_body: 1048576", "idle_timeout: 10m0s", "upgrades:\n      - websocket", "write_timeout: 1m0s", "close_timeout: 30s"} {
		if !bytes.Contains(out, []byte(s)) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// TestProxyRefuses: a config with a mistake names it and exits 1; a
// command line without -config exits 2.
func TestProxyRefuses(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("listeners: [{name: web, listen: \":1\", pool: db}]\npools: [{name: app, servers: [\"127.0.0.1:1\"]}]\n"), 0o644)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"proxy", "-check", "-config", bad}, 1, `listeners[0] (web).pool: no pool named "db"`},
		{[]string{"proxy", "-config", bad}, 1, `listeners[0] (web).pool: no pool named "db"`},
		{[]string{"proxy", "-check"}, 2, "-config FILE is required"},
		{[]string{"proxy", "-config", bad, "-drain", "0s"}, 2, "-drain 0s: want a positive duration"},
		{[]string{"proxy", "-config", filepath.Join(t.TempDir(), "none.yaml")}, 1, "no such file"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := spindleCmd(tc.args...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("exit %v, want status %d; stderr:\n%s", err, tc.code, &stderr)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, &stderr)
			}
		})
	}
}

// TestExampleConfigLogs: the README's `spindle proxy -config
// examples/proxy/proxy.yaml` can open the example's access logs on a
// fresh machine: each is standard error or a file in a directory that
// exists. The gateway's went to /var/log/spindle/gateway.log, and the
// command printed in the README stopped at once ("open
// /var/log/spindle/gateway.log: no such file or directory").
func TestExampleConfigLogs(t *testing.T) {
	cfg, err := proxy.LoadConfig("../../examples/proxy/proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range cfg.Listeners {
		if l.AccessLog == nil || l.AccessLog.Path == "-" {
			continue
		}
		if _, err := os.Stat(filepath.Dir(l.AccessLog.Path)); err != nil {
			t.Errorf("listener %s: access log %s: %v", l.Name, l.AccessLog.Path, err)
		}
	}
}

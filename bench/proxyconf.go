package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The proxy arms' configurations. Each generator takes the address the
// proxy listens on and the upstream echo server's address (both numeric
// "ip:port") and returns a config file's text; the files live in the run's
// temporary directory and go with it.

// SpindleProxyConfig returns a `spindle proxy` config: one listener
// forwarding to the single upstream, on the engine backend given, with one
// loop on cpu. No health checks and no admin server: the data path only.
func SpindleProxyConfig(backend, listen, upstream string, cpu int) string {
	return fmt.Sprintf(`# spindle bench proxy: generated, removed after the run
engine:
  backend: %s
  cpus: [%d]
listeners:
  - name: bench
    listen: %q
    pool: upstream
pools:
  - name: upstream
    servers: [%q]
`, backend, cpu, listen, upstream)
}

// HAProxyConfig returns an HAProxy config in mode tcp with one thread,
// forwarding listen to upstream, for up to conns clients. Logging is off;
// timeouts are long enough that no idle benchmark connection is cut.
// maxconn is sized to conns: HAProxy raises its fd limit to twice it at
// start and refuses to start where it cannot.
func HAProxyConfig(listen, upstream string, conns int) string {
	return fmt.Sprintf(`# spindle bench proxy: generated, removed after the run
global
    nbthread 1
    maxconn %d

defaults
    mode tcp
    timeout connect 5s
    timeout client 5m
    timeout server 5m

frontend bench
    bind %s
    default_backend upstream

backend upstream
    server s1 %s
`, conns+64, listen, upstream)
}

// NginxConfig returns an nginx config with the stream module proxying
// listen to upstream for up to conns clients (two connections each): one
// process (no master, no daemon), its pid file in dir, errors on stderr.
// module is the stream module's .so to load, "" when nginx has it built
// in.
func NginxConfig(dir, module, listen, upstream string, conns int) string {
	load := ""
	if module != "" {
		load = fmt.Sprintf("load_module %s;\n", module)
	}
	return fmt.Sprintf(`# spindle bench proxy: generated, removed after the run
%sdaemon off;
master_process off;
worker_processes 1;
pid %s;
error_log stderr warn;

events {
    worker_connections %d;
}

stream {
    server {
        listen %s;
        proxy_pass %s;
    }
}
`, load, filepath.Join(dir, "nginx.pid"), 2*conns+64, listen, upstream)
}

// nginxStreamModules are where distributions put the dynamic stream
// module (Debian's libnginx-mod-stream, then Fedora's nginx-mod-stream).
var nginxStreamModules = []string{
	"/usr/lib/nginx/modules/ngx_stream_module.so",
	"/usr/lib64/nginx/modules/ngx_stream_module.so",
}

// nginxStream finds how nginx gets its stream module: the .so to load, or
// "" when `nginx -V` says it is built in. It fails, naming the package to
// install, when it has neither.
func nginxStream(nginx string) (string, error) {
	for _, m := range nginxStreamModules {
		if _, err := os.Stat(m); err == nil {
			return m, nil
		}
	}
	out, err := exec.Command(nginx, "-V").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s -V: %v", nginx, err)
	}
	for _, f := range strings.Fields(string(out)) {
		if f == "--with-stream" {
			return "", nil
		}
	}
	return "", fmt.Errorf("nginx has no stream module (not built in, and none of %s): install libnginx-mod-stream (apt-get install libnginx-mod-stream)", strings.Join(nginxStreamModules, ", "))
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spindlenet/spindle/proxy"
)

func init() {
	register("proxy", "L4 TCP and HTTP reverse proxy (HTTP/1.1, HTTP/2, TLS) on the engine, from a YAML config (-check validates it; SIGHUP reloads it)", runProxy)
	c := commands["proxy"]
	c.reloads = true
	commands["proxy"] = c
}

// proxyUsage follows the flags in -h.
const proxyUsage = `
spindle proxy -config FILE runs until SIGINT or SIGTERM, then drains
(-drain; a second signal closes what is left at once). SIGHUP reads FILE
again and applies it (proxy.Proxy.Reload): pools, servers, routes and
listeners change; open connections keep what they were made with (the
kept-alive HTTP clients of a listener removed or changed are closed after
their response in progress); a change of the engine
section or admin.listen, or a config that does not load, is refused and
the proxy goes on with the config it has. Each SIGHUP logs one line to
stderr: the listeners in force, or the error. SIGUSR1 reopens the access
log files (after logrotate moved them).
`

func runProxy(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	config := fs.String("config", "", "YAML config file (required)")
	check := fs.Bool("check", false, "validate the config, print it with its defaults and exit")
	drain := fs.Duration("drain", proxy.DefaultDrain, "on SIGINT or SIGTERM, how long open connections may take to finish before they are closed")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: spindle proxy -config FILE [-drain D] | -check -config FILE")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), proxyUsage)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *config == "" {
		return usageError{err: errors.New("-config FILE is required")}
	}
	if *drain <= 0 {
		return usageError{err: fmt.Errorf("-drain %v: want a positive duration", *drain)}
	}
	// SIGHUP reloads the config (as for nginx and HAProxy), a hangup
	// included; main leaves it to the command. Caught from here on, so
	// that one sent while the proxy starts is a reload once it runs,
	// not the signal's default, an exit.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, err := proxy.LoadConfig(*config)
	if err != nil {
		return err
	}
	if *check {
		out, err := cfg.YAML()
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(out)
		return err
	}
	p, err := proxy.New(cfg, &proxy.Options{Drain: *drain})
	if err != nil {
		return err
	}
	for _, l := range cfg.Listeners {
		fmt.Fprintf(os.Stderr, "spindle proxy: listener %s on %v, pool %s\n", l.Name, p.Addr(l.Name), l.Pool)
	}
	if a := p.AdminAddr(); a != nil {
		fmt.Fprintf(os.Stderr, "spindle proxy: admin on http://%v (/metrics, /healthz, /debug/config)\n", a)
	}
	// The first signal cancels ctx (main) and starts the drain; a second
	// one, as in HAProxy and Envoy, closes what is still open at once.
	// sig sees the first signal too, and only the signals main catches:
	// one ignored when spindle started stays ignored.
	got := 0
	if ctx.Err() != nil {
		got = 1 // before sig could see it
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, stopSignals(true)...)
	defer signal.Stop(sig)
	ran := make(chan struct{})
	defer close(ran)
	// SIGUSR1 reopens the access logs (after logrotate moved them).
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		for {
			select {
			case <-hup:
				reloadProxy(p, *config)
			case <-usr1:
				if err := p.ReopenLogs(); err != nil {
					fmt.Fprintf(os.Stderr, "spindle proxy: SIGUSR1: %v\n", err)
				}
			case <-ran:
				return
			}
		}
	}()
	go func() {
		for n := got; n < 2; n++ {
			select {
			case <-sig:
			case <-ran:
				return
			}
		}
		fmt.Fprintln(os.Stderr, "spindle proxy: second signal: closing open connections now")
		p.Abort()
	}()
	return p.Run(ctx)
}

// reloadProxy reads path again and applies it to p, and logs one line to
// stderr: the listeners in force after it, or why the config in force
// stays.
func reloadProxy(p *proxy.Proxy, path string) {
	cfg, err := proxy.LoadConfig(path)
	if err == nil {
		err = p.Reload(cfg)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "spindle proxy: reload failed, the config in force stays: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	var lns []string
	for _, l := range cfg.Listeners {
		lns = append(lns, fmt.Sprintf("%s on %v", l.Name, p.Addr(l.Name)))
	}
	fmt.Fprintf(os.Stderr, "spindle proxy: reloaded %s: listeners %s\n", path, strings.Join(lns, ", "))
}

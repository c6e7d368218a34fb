package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/spindlenet/spindle/proxy"
)

func init() {
	register("proxy", "L4 TCP proxy on the engine, from a YAML config (-check validates it)", runProxy)
}

func runProxy(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	config := fs.String("config", "", "YAML config file (required)")
	check := fs.Bool("check", false, "validate the config, print it with its defaults and exit")
	drain := fs.Duration("drain", proxy.DefaultDrain, "on SIGINT or SIGTERM, how long open connections may take to finish before they are closed")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *config == "" {
		return usageError{errors.New("-config FILE is required")}
	}
	if *drain <= 0 {
		return usageError{fmt.Errorf("-drain %v: want a positive duration", *drain)}
	}
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
	return p.Run(ctx)
}

package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spindlenet/spindle/proxy"
)

// testProxyMain is this test binary as the spindle arms' proxy command
// (proxyChildEnv): `spindle proxy`'s -config and -drain, the proxy package
// run until SIGTERM or SIGINT, its log on stderr (the engine's start-up
// line engineFellBack reads).
func testProxyMain(args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	path := fs.String("config", "", "config file")
	drain := fs.Duration("drain", time.Second, "drain")
	if err := fs.Parse(args); err != nil {
		return err
	}
	text, err := os.ReadFile(*path)
	if err != nil {
		return err
	}
	cfg, err := proxy.ParseConfig(text)
	if err != nil {
		return err
	}
	p, err := proxy.New(cfg, &proxy.Options{Drain: *drain, Logf: func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return p.Run(ctx)
}

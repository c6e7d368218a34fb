package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spindlenet/spindle/bench"
)

func main() {
	bench.RegisterArm(gnetArm)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := bench.ServeMain(ctx, os.Args[1:], os.Stdin, os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage is printed
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "spindle-peers:", err)
		// A command line it cannot run, as spindle bench server's.
		if errors.As(err, new(*bench.UsageError)) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

package main

import (
	"context"
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
	if err != nil {
		fmt.Fprintln(os.Stderr, "spindle-peers:", err)
		os.Exit(1)
	}
}

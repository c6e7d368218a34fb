// Command spindle runs spindle's benchmarks (bench, wakeup), host tuner (tune),
// doctor and L4 proxy (proxy).
//
// The command is thin: each subcommand parses its flags and calls one
// package's Run function. Subcommands register themselves from their own
// file with register, so each lives beside the flags it owns.
//
// Exit status: 0 for a run that did what was asked (a smoke run too, one
// whose --duration was too short for its measurements: it says so); 2 for
// a command line that cannot be run as given on any host (an unknown
// command or flag, a value that does not parse or is outside its range or
// list, flags that do not go together, an argument after the flags),
// said before anything runs: a flag that does not parse, or an argument
// left after the flags, after the usage, and any other with a pointer to
// it ("run 'spindle bench proxy -h' for usage"); 1 for a run that failed,
// or that this host refused (a CPU that is not online or that the
// process may not run on, an arm or tool it does not have, a plan it
// cannot make).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand of spindle.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
	// reloads: SIGHUP is the command's own (proxy: a config reload), not
	// a stop.
	reloads bool
}

var commands = map[string]command{}

// register adds a subcommand; it is called from init functions only.
func register(name, summary string, run func(ctx context.Context, args []string) error) {
	if _, dup := commands[name]; dup {
		panic("spindle: subcommand registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: spindle <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, commands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "-h" || name == "--help" || name == "help" {
		usage()
		return
	}
	cmd, ok := commands[name]
	if !ok {
		usage()
		fmt.Fprintf(os.Stderr, "spindle: unknown command %q\n", name)
		os.Exit(2)
	}
	// A hangup (the terminal or the ssh session gone) stops a command like
	// Ctrl-C: killed by it, bench left its wire namespaces behind. A
	// signal ignored when the command started (nohup's SIGHUP, SIGINT in
	// a script's background job) stays ignored: catching it would undo
	// that.
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals(cmd.reloads)...)
	err := cmd.run(ctx, os.Args[2:])
	// The error names the subcommand that ran (bench proxy, tune plan).
	var sub subcommandError
	if errors.As(err, &sub) {
		name += " " + sub.name
	}
	// Before stop, ctx has a cause only if a signal cancelled it.
	interrupted := context.Cause(ctx)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the flag set printed the usage
	}
	if err != nil && interrupted != nil {
		// What failed after the signal (a cancelled measurement, a server
		// child that got the terminal's SIGINT too, a closed connection)
		// is mostly its consequence: say first what happened, and keep
		// the error, which a command that does not stop for signals (tune
		// apply) may have for reasons of its own, on the same line.
		fmt.Fprintf(os.Stderr, "spindle %s: interrupted (%v): %s\n", name, interrupted, strings.ReplaceAll(err.Error(), "\n", "; "))
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "spindle %s: %v\n", name, err)
		var ue usageError
		if errors.As(err, &ue) {
			if !ue.shown {
				fmt.Fprintf(os.Stderr, "run 'spindle %s -h' for usage\n", name)
			}
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// subcommandError is the error of a command's subcommand (bench proxy,
// tune plan): main names the subcommand after the command, at the start
// of the error and in a usage error's pointer to the usage. The command
// that dispatches to the subcommand wraps its error (inSubcommand), so
// that a word after the command that names none (bench extra) is not
// taken for one.
type subcommandError struct {
	name string // the subcommand's word after the command's
	err  error
}

func (e subcommandError) Error() string { return e.err.Error() }
func (e subcommandError) Unwrap() error { return e.err }

// inSubcommand returns err, the error of subcommand name, as a
// subcommandError; nil for nil.
func inSubcommand(name string, err error) error {
	if err == nil {
		return nil
	}
	return subcommandError{name: name, err: err}
}

// parseFlags parses args into fs and refuses arguments left after the
// flags: parsing stops at the first argument that is not a flag, so a
// stray word or a misplaced subcommand (bench --duration 5s sweep) would
// otherwise be ignored, and the command run without it.
//
// A command line it refuses is a usageError, printed after the usage; the
// flag package's own copy of the message, printed before the usage, is
// dropped so that the error is said once.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(nil)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q: this command takes only flags", fs.Arg(0))
	}
	if err != nil {
		fs.Usage()
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return usageError{err: err, shown: true}
	}
	return err
}

// usageError is a command line that cannot be run as given, on any host:
// main exits with status 2 for it, as for an unknown command, and 1 for a
// run that failed or that this host refused.
type usageError struct {
	err error
	// shown is true when the usage was printed before the error
	// (parseFlags); main otherwise says where to find it.
	shown bool
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// givenTwice returns the first name of list that an earlier one repeats,
// "" when none does (an empty name is the package's to refuse).
func givenTwice(list []string) string {
	for i, s := range list {
		if s != "" && slices.Contains(list[:i], s) {
			return s
		}
	}
	return ""
}

// stopSignals are the signals that stop a command: SIGTERM, and SIGINT and
// SIGHUP unless they were ignored when spindle started (SIGHUP not for a
// command that reloads on it).
func stopSignals(reloads bool) []os.Signal {
	sigs := []os.Signal{syscall.SIGTERM}
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGHUP} {
		if !signal.Ignored(s) && !(reloads && s == syscall.SIGHUP) {
			sigs = append(sigs, s)
		}
	}
	return sigs
}

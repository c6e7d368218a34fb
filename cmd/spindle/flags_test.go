package main

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/bench"
)

// TestBenchClientRefusesDefaults: bench client's -payload and -warmup are
// measured as given or refused before connecting. The load generator takes
// 0 for its default, so -payload 0 measured 128-byte payloads and
// -warmup 0 warmed up for 200 ms, the command saying nothing of either;
// -payload 1 failed only in the generator, after the flags. -threads
// above -conns (50 by default) ran with one thread per connection, the
// command saying nothing of it.
func TestBenchClientRefusesDefaults(t *testing.T) {
	for _, tc := range []struct {
		flag, value string
	}{
		{"-payload", "0"},
		{"-payload", "1"},
		{"-payload", strconv.Itoa(bench.MaxPayload + 1)},
		{"-warmup", "0s"},
		{"-threads", "51"},
	} {
		// Nothing listens on port 1: a run that gets past the flags
		// fails to connect.
		stderr := wantRefusal(t, spindleCmd("bench", "client", "-addr", "127.0.0.1:1", "-duration", "100ms", tc.flag, tc.value))
		if !strings.Contains(stderr, tc.flag) || strings.Contains(stderr, "connect") {
			t.Errorf("bench client %s %s: stderr %q; want a refusal naming %s, before connecting", tc.flag, tc.value, stderr, tc.flag)
		}
	}
}

// TestCLIValueErrorsExit2: a flag value the command refuses before doing
// anything (out of range, given twice, a required flag missing) is a
// command line that cannot be run as given, and exits with status 2 as a
// value that does not parse does, and as bench proxy, bench http2 and
// proxy already exited for theirs; bench, bench sweep, bench client,
// wakeup and tune exited 1, the status of a run that failed (bench client
// without -addr, which its help calls required, until later; wakeup's
// CPUs below -1, the "default", ran with the default CPU). Later still:
// bench client's -rate below 0 or NaN, --streams above the servers' limit,
// and --tls-handshakes or --tls-resume with an h2load protocol (flags that
// do not go together) exited 1 from inside package bench; tune plan's
// flags that do not go together (--irq-suspend-ns without --busy-poll,
// --busy-poll or --irq-cpus with the other policy, an interface named
// twice), a negative --busy-poll or --exclude-irqs exited 1 from inside
// tune.MakePlan, the last as an IRQ this host does not have; bench's
// --server-rps without --topology wire, or not a CPU list nor none, and an
// open-loop fraction given twice exited 1 from inside bench.Run.
func TestCLIValueErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--reps", "0", "--arms", "go-net"},
		{"bench", "--payload", "1", "--arms", "go-net"},
		{"bench", "--fractions", "3", "--arms", "go-net"},
		{"bench", "--arms", "go-net,go-net"},
		{"bench", "--server-cpus", "x", "--arms", "go-net"},
		{"bench", "sweep", "--loops", "2"},
		{"bench", "sweep", "--compute-list", "-1"},
		{"bench", "client", "-addr", "127.0.0.1:1", "-conns", "0"},
		{"bench", "client", "-addr", "127.0.0.1:1", "-payload", "0"},
		{"bench", "client", "-addr", "127.0.0.1:1", "-host", "example.test"},
		{"bench", "client", "-addr", "127.0.0.1:1", "-conns", "2", "-threads", "3"},
		{"bench", "client", "-duration", "100ms"},
		{"bench", "--conns", "2", "--client-threads", "3"},
		{"wakeup", "--samples", "0"},
		{"wakeup", "--modes", "block,block"},
		{"wakeup", "--modes", "block", "--samples", "1", "--reader-cpu", "-2"},
		{"wakeup", "--modes", "block", "--samples", "1", "--writer-cpu", "-2"},
		{"tune", "diagnose", "--period", "0s"},
		{"tune", "diagnose", "--locked-mib", "0"},
		{"tune", "plan", "--exclude-irqs", "x"},
		{"tune", "apply"},
		{"bench", "client", "-addr", "127.0.0.1:1", "-rate", "-1"},
		{"bench", "client", "-addr", "127.0.0.1:1", "-rate", "NaN"},
		{"bench", "http2", "--streams", "101"},
		{"bench", "proxy", "--protocol", "h2", "--streams", "101"},
		{"bench", "proxy", "--protocol", "h2", "--tls-handshakes"},
		{"bench", "proxy", "--protocol", "h2h2", "--tls-resume"},
		{"bench", "--arms", "go-net", "--server-rps", "0"},
		{"bench", "--arms", "go-net", "--topology", "wire", "--server-rps", "x"},
		{"bench", "--arms", "go-net", "--fractions", "0.5,.50"},
		{"tune", "plan", "--busy-poll", "-1"},
		{"tune", "plan", "--irq-suspend-ns", "5"},
		{"tune", "plan", "--policy", "dedicated", "--busy-poll", "50"},
		{"tune", "plan", "--irq-cpus", "0"},
		{"tune", "plan", "--iface", "lo,lo"},
		{"tune", "plan", "--exclude-irqs", "-3"},
		{"bench", "ab", "base=/bin/true"},
		{"bench", "ab", "base=/bin/true", "base=/bin/false"},
		{"bench", "ab", "base=/bin/true", "/bin/false"},
		{"bench", "ab", "--reps", "0", "a=/bin/true", "b=/bin/false"},
		{"bench", "ab", "a=/bin/true", "b=/bin/false", "--reps", "2"},
	} {
		stderr := wantRefusal(t, spindleCmd(args...))
		cmd := spindleCmd(args...)
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("spindle %v: %v (stderr %q), want exit status 2", args, err, stderr)
		}
	}
}

// TestEnumeratedFlagValuesAreUsageErrors: a value outside a flag's list
// (wakeup's --modes and --topology, bench's and bench sweep's --arms and
// --topology, bench proxy's and bench http2's --arms, tune plan's
// --policy; bench client's -protocol, bench proxy's --upstream-arm, and
// every bench command's --ratio-to, unknown or given twice) is a usage
// error, exit 2, naming the flag and the values it takes. They were found
// only in package bench or tune, after the flags, and exited 1 as a run
// that failed, without naming the flag (--upstream-arm gnet or bogus only
// once the upstream server child had failed to start).
func TestEnumeratedFlagValuesAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"wakeup", "--modes", "block,bogus", "--samples", "1"}, []string{`--modes: bench: unknown wake-up mode "bogus"`, strings.Join(bench.WakeupModes, " ")}},
		{[]string{"wakeup", "--modes", "block", "--topology", "bogus"}, []string{`--topology: bench: unknown topology "bogus" (loopback or wire)`}},
		{[]string{"bench", "--arms", "go-net,bogus"}, []string{`--arms: bench: unknown arm "bogus"`, "go-net uring"}},
		{[]string{"bench", "sweep", "--arms", "bogus"}, []string{`--arms: bench: unknown arm "bogus"`, "go-net uring"}},
		{[]string{"bench", "--arms", "go-net", "--topology", "bogus"}, []string{`--topology: bench: unknown topology "bogus" (loopback or wire)`}},
		{[]string{"bench", "proxy", "--arms", "bogus"}, []string{`--arms: bench: unknown proxy arm "bogus"`, strings.Join(bench.ProxyArms, ", ")}},
		{[]string{"bench", "http2", "--arms", "bogus"}, []string{`--arms: bench: unknown http2 arm "bogus"`, strings.Join(bench.HTTP2Arms, ", ")}},
		{[]string{"tune", "plan", "--policy", "bogus"}, []string{`--policy: refused: unknown policy "bogus" (inline or dedicated)`}},
		{[]string{"bench", "client", "-addr", "127.0.0.1:1", "-protocol", "bogus"}, []string{`-protocol "bogus": want rpc or http`}},
		{[]string{"bench", "proxy", "--upstream-arm", "bogus"}, []string{`--upstream-arm: bench: upstream arm "bogus"`, "go-net, epoll"}},
		{[]string{"bench", "proxy", "--upstream-arm", "gnet"}, []string{`--upstream-arm: bench: upstream arm "gnet"`, "go-net, epoll"}},
		{[]string{"bench", "proxy", "--protocol", "h2h2", "--upstream-arm", "epoll"}, []string{`--upstream-arm: bench: upstream arm "epoll"`, bench.HTTP2ArmsFlag()}},
		{[]string{"bench", "proxy", "--ratio-to", "bogus"}, []string{`--ratio-to: bench: ratio reference "bogus"`, "spindle-uring, spindle-epoll"}},
		{[]string{"bench", "proxy", "--arms", "spindle-uring", "--ratio-to", "haproxy"}, []string{`--ratio-to: bench: ratio reference "haproxy" is not one of the arms asked for (spindle-uring)`}},
		{[]string{"bench", "proxy", "--ratio-to", "nginx,nginx"}, []string{`--ratio-to: bench: ratio reference "nginx" given twice`}},
		{[]string{"bench", "http2", "--ratio-to", "bogus"}, []string{`--ratio-to: bench: ratio reference "bogus"`, "go-net-http"}},
		{[]string{"bench", "--ratio-to", "bogus"}, []string{`--ratio-to: bench: ratio reference "bogus"`, "go-net"}},
		{[]string{"bench", "--arms", "go-net", "--ratio-to", "uring"}, []string{`--ratio-to: bench: ratio reference "uring" is not one of the arms asked for (go-net)`}},
		{[]string{"bench", "sweep", "--ratio-to", "go-net,go-net"}, []string{`--ratio-to: bench: ratio reference "go-net" given twice`}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := spindleCmd(tc.args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Errorf("spindle %v: %v, want exit status 2:\n%s", tc.args, err, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("spindle %v: stderr does not say %q:\n%s", tc.args, w, stderr.String())
				}
			}
		})
	}
}

// TestCLIUsageErrorsAfterTheFlagsPointToTheUsage: a command line refused
// once its flags have parsed (a value out of range or not in its list,
// flags that do not go together, a required flag missing) exited 2 with
// its error alone, where one that did not parse printed the usage too.
// Each now says its error once and then, on the last line, where the
// usage is: the (sub)command's own -h, which prints it and exits 0.
func TestCLIUsageErrorsAfterTheFlagsPointToTheUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		cmd  string // the command the pointer names
		want string // the error
	}{
		{[]string{"bench", "--arms", "bogus"}, "bench", `--arms: bench: unknown arm "bogus"`},
		{[]string{"bench", "--arms", "go-net", "--fractions", "3"}, "bench", `bad --fractions value "3"`},
		{[]string{"bench", "sweep", "--loops", "2"}, "bench sweep", "--loops does not apply to a sweep"},
		{[]string{"bench", "proxy", "--protocol", "udp"}, "bench proxy", "want a --protocol of"},
		{[]string{"bench", "http2", "--body", "-1"}, "bench http2", "want a --body of"},
		{[]string{"bench", "client", "-duration", "100ms"}, "bench client", "-addr is required"},
		{[]string{"bench", "server", "-arm", "bogus"}, "bench server", `-arm: bench: unknown arm "bogus"`},
		{[]string{"bench", "server", "-arm", "go-net", "-cpus", "x"}, "bench server", "-cpus: bench:"},
		{[]string{"bench", "http2-server", "-body", "-1"}, "bench http2-server", "-body -1 outside"},
		{[]string{"bench", "http2-server", "-arm", "bogus"}, "bench http2-server", `no arm "bogus"`},
		{[]string{"wakeup", "--samples", "0"}, "wakeup", "want --samples of at least 1"},
		{[]string{"tune", "plan", "--policy", "bogus"}, "tune plan", `--policy: refused: unknown policy "bogus"`},
		{[]string{"tune", "diagnose", "--period", "0s"}, "tune diagnose", "--period must be positive"},
		{[]string{"doctor", "--loops", "-1"}, "doctor", "want --loops and --read-buffers not negative"},
		{[]string{"proxy"}, "proxy", "-config FILE is required"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := spindleCmd(tc.args...)
			stderr := wantRefusal(t, cmd)
			if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() != 2 {
				t.Errorf("%v, want exit status 2:\n%s", cmd.ProcessState, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			pointer := "run 'spindle " + tc.cmd + " -h' for usage"
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "spindle ") || !strings.Contains(lines[0], tc.want) || lines[1] != pointer {
				t.Errorf("stderr:\n%s\nwant the error (%q) on one line, then %q", stderr, tc.want, pointer)
			}
			help := spindleCmd(append(strings.Fields(tc.cmd), "-h")...)
			if out, err := help.CombinedOutput(); err != nil || !strings.Contains(string(out), "Usage of") && !strings.Contains(string(out), "usage:") {
				t.Errorf("spindle %s -h: %v, want its usage and exit status 0:\n%s", tc.cmd, err, out)
			}
		})
	}
}

// TestHostRefusalsExit1: exit status 2 is for a command line that is
// wrong on any host, 1 for a run that failed or that this host refused
// (the package doc). A CPU the process may not run on, or one that is not
// online, is this host's refusal: bench, bench proxy and bench http2
// exited 1 for it, wakeup 2. bench server exited 1 for it too, but also
// for a -cpus list that did not parse. A --warmup and --window that fit
// in the share of the fewest measurements the flags can make but not in
// that of the arms that run here are this host's refusal too; ones that
// fit on no host are refused before any arm is built, exit 2.
func TestHostRefusalsExit1(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("bench and wakeup are Linux only")
	}
	bin := spindleBin(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"wakeup", "--modes", "block", "--samples", "1", "--reader-cpu", "4096"}, 1, "--reader-cpu 4096: not a CPU this process may run on"},
		{[]string{"bench", "server", "-arm", "go-net", "-cpus", "4096"}, 1, "4096"},
		{[]string{"bench", "--arms", "go-net", "--server-cpus", "4096", "--out", ""}, 1, "CPU 4096 does not exist or is offline"},
		// go-net and epoll run on every Linux host: two measurements of
		// 250ms, where the flags ask for 400ms.
		{[]string{"bench", "--arms", "go-net,epoll", "--fractions", "", "--reps", "1", "--duration", "500ms", "--warmup", "200ms", "--window", "200ms", "--out", ""}, 1,
			"a warm-up of 200ms + a window of 200ms = 400ms, more than each measurement's share of the duration, 500ms / 2 measurements = 250ms"},
		// One measurement at the least: no host can fit it.
		{[]string{"bench", "--arms", "go-net,epoll", "--fractions", "", "--reps", "1", "--duration", "300ms", "--warmup", "200ms", "--window", "200ms", "--out", ""}, 2,
			"a warm-up of 200ms + a window of 200ms = 400ms, more than each measurement's share of the duration, 300ms / 1 measurement = 300ms"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			stderr := wantRefusal(t, cmd)
			if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("%v, want exit status %d saying %q:\n%s", cmd.ProcessState, tc.code, tc.want, stderr)
			}
			if strings.Contains(stderr, "measurements on") {
				t.Errorf("measured before refusing:\n%s", stderr)
			}
			if pointed := strings.Contains(stderr, "for usage"); pointed != (tc.code == 2) {
				t.Errorf("points to the usage: %v, want %v:\n%s", pointed, tc.code == 2, stderr)
			}
		})
	}
}

// TestCLIErrorsNameTheSubcommand: an error, a usage error or a failed
// run, starts with the command and the subcommand that ran ("spindle
// bench proxy: "), as the pointer to the usage names them. Every
// subcommand's began "spindle bench: " or "spindle tune: " whatever it
// was. A word after the command that names no subcommand (bench extra)
// is not taken for one.
func TestCLIErrorsNameTheSubcommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // the start of the error's line
	}{
		{[]string{"bench", "--reps", "0", "--arms", "go-net"}, 2, "spindle bench: want --reps"},
		{[]string{"bench", "extra"}, 2, `spindle bench: unexpected argument "extra"`},
		{[]string{"bench", "sweep", "--loops", "2"}, 2, "spindle bench sweep: --loops does not apply to a sweep"},
		{[]string{"bench", "proxy", "--protocol", "udp"}, 2, "spindle bench proxy: want a --protocol"},
		{[]string{"bench", "proxy", "--out", "", "--proxy-cpu", "4000"}, 1, "spindle bench proxy: bench: CPU 4000 does not exist"},
		{[]string{"bench", "http2", "--body", "-1"}, 2, "spindle bench http2: want a --body"},
		{[]string{"bench", "http2", "--out", "", "--server-cpus", "4000"}, 1, "spindle bench http2: bench: CPU 4000 does not exist"},
		{[]string{"bench", "client", "-duration", "100ms"}, 2, "spindle bench client: -addr is required"},
		{[]string{"bench", "client", "-addr", "127.0.0.1:1", "-duration", "100ms"}, 1, "spindle bench client: bench: load: connect 127.0.0.1:1"},
		{[]string{"bench", "server", "-arm", "bogus"}, 2, `spindle bench server: -arm: bench: unknown arm "bogus"`},
		{[]string{"bench", "http2-server", "-arm", "bogus"}, 2, "spindle bench http2-server: "},
		{[]string{"tune", "bogus"}, 2, `spindle tune: unknown tune subcommand "bogus"`},
		{[]string{"tune", "inspect", "--pid", "-1"}, 2, "spindle tune inspect: --pid -1: not a process id"},
		{[]string{"tune", "inspect", "--root", "/nonexistent"}, 1, "spindle tune inspect: topo: "},
		{[]string{"tune", "diagnose", "--period", "0s"}, 2, "spindle tune diagnose: --period must be positive"},
		{[]string{"tune", "plan", "--policy", "bogus"}, 2, "spindle tune plan: --policy: "},
		{[]string{"tune", "apply"}, 2, "spindle tune apply: --plan is required"},
		{[]string{"tune", "apply", "--plan", "/nonexistent"}, 1, "spindle tune apply: open /nonexistent"},
		{[]string{"tune", "revert", "--state", "/nonexistent"}, 1, "spindle tune revert: no state file /nonexistent"},
		{[]string{"doctor", "--loops", "-1"}, 2, "spindle doctor: want --loops"},
		{[]string{"wakeup", "--samples", "0"}, 2, "spindle wakeup: want --samples"},
		{[]string{"proxy"}, 2, "spindle proxy: -config FILE is required"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if tc.code == 1 && runtime.GOOS != "linux" {
				t.Skip("the runs that fail here fail on Linux hosts only")
			}
			cmd := spindleCmd(tc.args...)
			stderr := wantRefusal(t, cmd)
			if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() != tc.code {
				t.Errorf("%v, want exit status %d:\n%s", cmd.ProcessState, tc.code, stderr)
			}
			if !slices.ContainsFunc(strings.Split(stderr, "\n"), func(l string) bool { return strings.HasPrefix(l, tc.want) }) {
				t.Errorf("no line of stderr starts with %q:\n%s", tc.want, stderr)
			}
		})
	}
}

// TestHelpSaysEachDefaultOnce: a flag whose help says its default in words
// ("(default: the first CPU this process may run on)") has no other
// default printed after it by the flag package, which prints a value that
// is not the zero value (wakeup's --reader-cpu and --writer-cpu printed
// "(default -1)" after their words, -1 being what stands for them).
func TestHelpSaysEachDefaultOnce(t *testing.T) {
	printed := regexp.MustCompile(`\(default [^)]*\)$`)
	for _, args := range [][]string{
		{"bench"}, {"bench", "sweep"}, {"bench", "proxy"}, {"bench", "http2"}, {"bench", "client"},
		{"bench", "server"}, {"bench", "http2-server"}, {"wakeup"}, {"doctor"}, {"proxy"},
		{"tune", "inspect"}, {"tune", "diagnose"}, {"tune", "plan"}, {"tune", "apply"}, {"tune", "revert"},
	} {
		out, err := spindleCmd(append(args, "-h")...).CombinedOutput()
		if err != nil {
			t.Errorf("spindle %v -h: %v\n%s", args, err, out)
			continue
		}
		// The flag package prints each flag's help on the line after its
		// name, indented with a tab.
		lines := strings.Split(string(out), "\n")
		for i, l := range lines {
			if i > 0 && strings.HasPrefix(l, "    \t") && strings.Contains(l, "(default: ") && printed.MatchString(l) {
				t.Errorf("spindle %v -h: %s says its default twice: %s", args, strings.TrimSpace(lines[i-1]), strings.TrimPrefix(l, "    \t"))
			}
		}
	}
}

// TestBenchSweepHelpPrintsNoDefaultForRefusedFlags: bench sweep refuses
// --loops and --compute-us (its grid's axes are --loops-list and
// --compute-list), but its usage printed bench's "(default 1)" after
// --loops, a value the sweep never runs with. Each of the two now says
// what the sweep does instead, and prints no default.
func TestBenchSweepHelpPrintsNoDefaultForRefusedFlags(t *testing.T) {
	out, err := spindleCmd("bench", "sweep", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("spindle bench sweep -h: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	for name, list := range map[string]string{"loops": "--loops-list", "compute-us": "--compute-list"} {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "  -"+name+" ") })
		if i < 0 || i+1 >= len(lines) {
			t.Errorf("bench sweep -h has no --%s:\n%s", name, out)
			continue
		}
		help := strings.TrimSpace(lines[i+1])
		if strings.Contains(help, "(default") || !strings.Contains(help, "not for a sweep: give "+list+" (the sweep measures each") {
			t.Errorf("bench sweep -h: --%s: %q, want what the sweep does instead (%s), and no default", name, help, list)
		}
	}
}

// TestBenchProxyUpstreamArmHelpNamesTheArmsTaken: bench proxy's
// --upstream-arm help said that with --protocol http or h2 the arm is
// one that answers HTTP/1.1, "go-net, epoll, uring", where the command
// takes every bench server arm this binary serves (each answers HTTP/1.1
// and the RPC echo), and named none for tcp. For each protocol, an arm is
// taken exactly when the help names it for that protocol, and one it
// does not name is a usage error (exit status 2) naming --upstream-arm.
func TestBenchProxyUpstreamArmHelpNamesTheArmsTaken(t *testing.T) {
	out, err := spindleCmd("bench", "proxy", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("spindle bench proxy -h: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "  -upstream-arm ") })
	if i < 0 || i+1 >= len(lines) {
		t.Fatalf("bench proxy -h has no --upstream-arm:\n%s", out)
	}
	help := strings.TrimSpace(lines[i+1])
	// The arms named for a protocol: the list after the last colon of its
	// part of the help, up to its default.
	named := func(part string) []string {
		part = part[strings.LastIndex(part, ": ")+2:]
		list, _, ok := strings.Cut(part, " (default ")
		if !ok {
			t.Fatalf("--upstream-arm help %q: no list of arms before a default in %q", help, part)
		}
		return strings.Split(list, ", ")
	}
	plain, h2h2, ok := strings.Cut(help, "; with --protocol h2h2")
	if !ok {
		t.Fatalf("--upstream-arm help %q says nothing of --protocol h2h2", help)
	}
	if !strings.Contains(plain, "--protocol tcp, http or h2") {
		t.Errorf("--upstream-arm help %q does not say which protocols its first list is for", help)
	}
	candidates := []string{"no-such-arm"}
	for _, a := range bench.Arms() {
		candidates = append(candidates, a.Name)
	}
	candidates = append(candidates, bench.HTTP2Arms...)
	for _, tc := range []struct {
		protocol string
		named    []string
	}{
		{bench.ProxyProtocolTCP, named(plain)},
		{bench.ProxyProtocolHTTP, named(plain)},
		{bench.ProxyProtocolH2, named(plain)},
		{bench.ProxyProtocolH2H2, named(h2h2)},
	} {
		for _, arm := range candidates {
			// --ratio-to is checked after --upstream-arm: a run whose arm
			// is taken is refused for its --ratio-to, before it starts.
			err := runBenchProxy(context.Background(), []string{"--protocol", tc.protocol, "--upstream-arm", arm, "--ratio-to", "no-such-arm", "--out", ""})
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("bench proxy --protocol %s --upstream-arm %s --ratio-to no-such-arm: %v, want a usage error", tc.protocol, arm, err)
			}
			taken, inHelp := !strings.Contains(err.Error(), "--upstream-arm"), slices.Contains(tc.named, arm)
			if taken != inHelp {
				t.Errorf("bench proxy --protocol %s --upstream-arm %s: taken %v (%v), named in the help %v (%q)", tc.protocol, arm, taken, err, inHelp, tc.named)
			}
		}
	}
	var exit *exec.ExitError
	if err := spindleCmd("bench", "proxy", "--upstream-arm", "no-such-arm").Run(); !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("bench proxy --upstream-arm no-such-arm: %v, want exit status 2", err)
	}
}

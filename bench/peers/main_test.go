package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/leakcheck"
)

// peersArgsEnv makes this test binary the peers binary: it runs main()
// with the arguments the variable holds, one a line.
const peersArgsEnv = "SPINDLE_PEERS_TEST_ARGS"

// TestMain fails the package if a test leaks file descriptors or
// goroutines (a gnet engine that did not stop, a connection left open).
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(peersArgsEnv); ok {
		os.Args = append([]string{"spindle-peers"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(leakcheck.Run(m))
}

// TestCommandLineRefusedExit2: a command line the peers binary cannot run
// (a flag that does not parse, an arm it does not have) exits with status
// 2, as spindle bench server's does, saying its error once; -h prints the
// usage and exits 0. It exited 1 for every one of them, -h too, and said
// a flag error twice (the flag package's copy before the usage).
func TestCommandLineRefusedExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"-loops", "x"}, 2, `invalid value "x" for flag -loops`},
		{[]string{"-arm", "bogus"}, 2, `unknown arm "bogus"`},
		{[]string{"-h"}, 0, "-arm string"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), peersArgsEnv+"="+strings.Join(tc.args, "\n"))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			cmd.WaitDelay = time.Second
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			timer := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
			err := cmd.Wait()
			timer.Stop()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || strings.Count(stderr.String(), tc.say) != 1 {
				t.Errorf("exit status %d, want %d, saying %q once:\n%s", code, tc.code, tc.say, stderr.String())
			}
		})
	}
}

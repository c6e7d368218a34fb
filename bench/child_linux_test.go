package bench

import (
	"bufio"
	"context"
	"io"
	"testing"
	"time"
)

// TestServeMainControlStopsOnContext: a server in -control mode stops when
// its context is done, as without -control: the spindle and peers binaries
// turn SIGINT and SIGTERM into that context, and a control-mode server
// waiting for its next stdin line ignored both.
func TestServeMainControlStopsOnContext(t *testing.T) {
	skipUnlessLinux(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdin, keep := io.Pipe() // never written: no control line, no EOF
	defer keep.Close()
	hello, stdout := io.Pipe()
	defer hello.Close()
	done := make(chan error, 1)
	go func() {
		err := ServeMain(ctx, []string{"-arm", "go-net", "-control"}, stdin, stdout)
		stdout.Close()
		done <- err
	}()
	if _, err := bufio.NewReader(hello).ReadBytes('\n'); err != nil {
		t.Fatalf("no hello line: %v (ServeMain: %v)", err, <-done)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ServeMain -control still serving 30s after its context was cancelled")
	}
}

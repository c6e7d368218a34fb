package main

import (
	"os"
	"testing"

	"github.com/spindlenet/spindle/internal/leakcheck"
)

// TestMain fails the package if a test leaks file descriptors or
// goroutines (a gnet engine that did not stop, a connection left open).
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(m))
}

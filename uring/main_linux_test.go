package uring

import (
	"os"
	"testing"

	"github.com/spindlenet/spindle/internal/leakcheck"
	"github.com/spindlenet/spindle/internal/sys"
)

// TestMain fails the package when a test leaks file descriptors, goroutines
// or off-heap mappings: rings, sockets, buffer rings and arenas must all be
// closed (rings are torn down asynchronously, hence leakcheck's settle time).
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(m, leakcheck.Unchanged("off-heap mappings", sys.LiveMappings)))
}

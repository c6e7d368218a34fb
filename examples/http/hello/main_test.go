package hello

import (
	"os"
	"testing"

	"github.com/spindlenet/spindle/internal/leakcheck"
	"github.com/spindlenet/spindle/internal/sys"
)

// TestMain fails the package when its tests leave fds, goroutines or
// off-heap mappings (the engines' slabs and buffer rings) behind: every
// engine and client connection a test starts must be shut down and closed.
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(m, leakcheck.Unchanged("off-heap mappings", sys.LiveMappings)))
}

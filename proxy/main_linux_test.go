package proxy

import (
	"os"
	"testing"

	"github.com/spindlenet/spindle/internal/leakcheck"
	"github.com/spindlenet/spindle/internal/sys"
)

// TestMain checks that the proxies the tests ran left no fds, goroutines
// (health checkers, admin servers, loops) or off-heap mappings behind.
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(m, leakcheck.Unchanged("off-heap mappings", sys.LiveMappings)))
}

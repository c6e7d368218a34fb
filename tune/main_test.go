package tune

import (
	"os"
	"testing"

	"github.com/spindlenet/spindle/internal/leakcheck"
)

// TestMain fails the package if its tests leak file descriptors (netlink
// sockets) or goroutines.
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }

package sys

import (
	"os"
	"testing"

	"github.com/spindlenet/spindle/internal/leakcheck"
)

// TestMain fails the package when a test leaks a file descriptor (rings made
// by the raw calls), a goroutine or a MapAnon mapping.
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(m, leakcheck.Unchanged("MapAnon mappings", LiveMappings)))
}

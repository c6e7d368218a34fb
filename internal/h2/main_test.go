package h2

import (
	"os"
	"testing"

	"github.com/spindlenet/spindle/internal/leakcheck"
)

// TestMain fails the run if a test leaves a descriptor open or a goroutine
// running (TestGoClient's listener and connections).
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }

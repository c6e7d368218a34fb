package certgen_test

import (
	"os"
	"testing"

	"github.com/spindlenet/spindle/internal/leakcheck"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }

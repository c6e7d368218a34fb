package grpcinterop

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/spindlenet/spindle/internal/leakcheck"
	"github.com/spindlenet/spindle/internal/sys"
	"google.golang.org/grpc/grpclog"
)

// TestMain quiets grpc-go's logging, turns its Fatal (how the interop
// cases report a failure: os.Exit) into a panic catch recovers, and
// checks that the proxies, servers and clients the tests ran left no fds,
// goroutines or off-heap mappings behind.
func TestMain(m *testing.M) {
	grpclog.SetLoggerV2(fatalPanics{grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard)})
	os.Exit(leakcheck.Run(m, leakcheck.Unchanged("off-heap mappings", sys.LiveMappings)))
}

// fatal is the panic of a grpclog Fatal: the failure an interop case
// reported.
type fatal string

// fatalPanics is a grpclog.LoggerV2 whose Fatal functions panic with
// fatal instead of returning (grpclog would then exit the process). It is
// no grpclog.DepthLoggerV2, so that a component's FatalDepth comes to its
// Fatalln.
type fatalPanics struct{ grpclog.LoggerV2 }

func (fatalPanics) Fatal(args ...any)                 { panic(fatal(fmt.Sprint(args...))) }
func (fatalPanics) Fatalf(format string, args ...any) { panic(fatal(fmt.Sprintf(format, args...))) }
func (fatalPanics) Fatalln(args ...any)               { panic(fatal(fmt.Sprintln(args...))) }

// catch runs f and returns the failure it reported through grpclog's
// Fatal, if any; f's goroutine goes on after it (any goroutine).
func catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			m, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			err = errors.New(string(m))
		}
	}()
	f()
	return nil
}

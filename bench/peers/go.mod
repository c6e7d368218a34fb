module github.com/spindlenet/spindle/bench/peers

go 1.26.0

require (
	github.com/panjf2000/gnet/v2 v2.9.7
	github.com/spindlenet/spindle v0.0.0
	golang.org/x/sys v0.50.0
)

// Every requirement of the spindle module (../../go.mod) is listed here too,
// with go.sum entries, so that a spindle package starting to import one of
// them does not break this build before `go mod tidy` is run here.
require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/mdlayher/genetlink v1.4.0 // indirect
	github.com/mdlayher/netlink v1.11.2 // indirect
	github.com/mdlayher/socket v0.6.0 // indirect
	github.com/panjf2000/ants/v2 v2.11.3 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.27.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
)

// The spindle packages come from this source tree.
replace github.com/spindlenet/spindle => ../..

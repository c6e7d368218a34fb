module github.com/spindlenet/spindle/bench/peers

go 1.26.0

require (
	github.com/panjf2000/gnet/v2 v2.9.7
	github.com/spindlenet/spindle v0.0.0
	golang.org/x/sys v0.50.0
	// grpc-go and its protobuf runtime, at exact versions: grpcinterop's
	// tests run grpc-go's interop server and client cases through the
	// proxy (gRPC end to end over h2c).
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	cloud.google.com/go/compute/metadata v0.9.0 // indirect
	github.com/cncf/xds/go v0.0.0-20260202195803-dba9d589def2 // indirect
	github.com/envoyproxy/protoc-gen-validate v1.3.3 // indirect
	github.com/fatih/color v1.19.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	github.com/summerwind/h2spec v2.2.1+incompatible // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
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
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
)

// The spindle packages come from this source tree.
replace github.com/spindlenet/spindle => ../..

// h2spec, the HTTP/2 conformance suite: scripts/test.sh builds it from
// here for internal/h2's TestH2Spec (v2.2.1 has no go.mod: its
// dependencies are pinned by this file).
tool github.com/summerwind/h2spec/cmd/h2spec

package uring

import (
	"errors"
	"fmt"

	"github.com/spindlenet/spindle/internal/sys"
)

// Feature is one io_uring capability as probed on this host.
type Feature struct {
	Name      string `json:"name"`      // e.g. "IORING_OP_SEND_ZC", "multishot recv"
	Kind      string `json:"kind"`      // "op", "setup", "register", "behaviour"
	Supported bool   `json:"supported"` // the probe succeeded
	// Unknown: the probe could not ask the kernel (no loopback, a socket
	// refused, no answer in time), so Supported false is no verdict;
	// Reason says what failed.
	Unknown   bool   `json:"unknown,omitempty"`
	MinKernel string `json:"min_kernel"` // first mainline kernel with it
	Reason    string `json:"reason"`     // how it was decided, or why it is missing
}

// Features is the result of Probe.
type Features struct {
	Kernel       string    `json:"kernel"`            // uname release
	Disabled     int       `json:"io_uring_disabled"` // kernel.io_uring_disabled (0, 1, 2; -1 unknown)
	Available    bool      `json:"available"`         // a ring could be created
	Error        string    `json:"error,omitempty"`   // why not, when !Available
	FeatureFlags uint32    `json:"feature_flags"`     // IORING_FEAT_* of a default ring
	List         []Feature `json:"features"`          // every probed feature
}

// Get returns the feature with name.
//
// Any goroutine.
func (f *Features) Get(name string) (Feature, bool) {
	for _, x := range f.List {
		if x.Name == name {
			return x, true
		}
	}
	return Feature{}, false
}

// Has reports whether feature name is supported.
//
// Any goroutine.
func (f *Features) Has(name string) bool {
	x, ok := f.Get(name)
	return ok && x.Supported
}

// Err returns nil when feature name is supported, an error saying so when
// the probe could not ask the kernel (Feature.Unknown: not ErrNotSupported),
// otherwise an *UnsupportedFeatureError.
//
// Any goroutine.
func (f *Features) Err(name string) error {
	x, ok := f.Get(name)
	if ok && x.Supported {
		return nil
	}
	if x.Unknown {
		return fmt.Errorf("%s (support unknown)", x.Reason)
	}
	e := &UnsupportedFeatureError{Feature: name, MinKernel: x.MinKernel}
	switch {
	case !ok:
		e.MinKernel, e.Err = "?", errors.New("not probed")
	case x.Reason != "":
		e.Err = errors.New(x.Reason)
	}
	return e
}

// Feature names Probe reports beyond the IORING_* identifiers.
const (
	FeatMultishotAccept = "multishot accept"
	FeatMultishotRecv   = "multishot recv with buffer ring"
	FeatRecvBundle      = "recv bundle"
	FeatRecvLimit       = "multishot recv byte limit"
	// FeatShortSendLinkCut: a MSG_DONTWAIT|MSG_WAITALL SEND cut short
	// fails its link (HasShortSendLinkCut).
	FeatShortSendLinkCut = "short SEND fails its link"
	// FeatShortSendSkipCleared: such a SEND with FlagCQESkipSuccess
	// posts its result all the same (HasShortSendSkipCleared).
	FeatShortSendSkipCleared = "short SEND posts despite skip"
	FeatNAPI                 = "IORING_REGISTER_NAPI"
	FeatNAPIStatic           = "NAPI static tracking"
	// FeatIOWQAff is IORING_REGISTER_IOWQ_AFF (5.14), with which
	// Ring.RegisterIOWQAffinity confines io-wq workers to CPUs.
	FeatIOWQAff = "IORING_REGISTER_IOWQ_AFF"
	// FeatIOWQMaxWorkers is IORING_REGISTER_IOWQ_MAX_WORKERS (5.15), with
	// which Ring.RegisterIOWQMaxWorkers bounds io-wq workers.
	FeatIOWQMaxWorkers = "IORING_REGISTER_IOWQ_MAX_WORKERS"
	// FeatSyncCancelOp is IORING_REGISTER_SYNC_CANCEL keyed on an opcode
	// (IORING_ASYNC_CANCEL_OP, 6.6), with which Ring.Close waits for
	// requests running in io-wq; without it Close cannot confirm its
	// cancel (ErrCancelUnconfirmed).
	FeatSyncCancelOp = "sync cancel by opcode"
)

// opInfo names the opcodes spindle uses, with the kernel that added them.
var opInfo = []struct {
	op   uint8
	name string
	min  string
}{
	{sys.IORING_OP_NOP, "IORING_OP_NOP", "5.1"},
	{sys.IORING_OP_READ_FIXED, "IORING_OP_READ_FIXED", "5.1"},
	{sys.IORING_OP_WRITE_FIXED, "IORING_OP_WRITE_FIXED", "5.1"},
	{sys.IORING_OP_POLL_ADD, "IORING_OP_POLL_ADD", "5.1"},
	{sys.IORING_OP_POLL_REMOVE, "IORING_OP_POLL_REMOVE", "5.1"},
	{sys.IORING_OP_SENDMSG, "IORING_OP_SENDMSG", "5.3"},
	{sys.IORING_OP_TIMEOUT, "IORING_OP_TIMEOUT", "5.4"},
	{sys.IORING_OP_TIMEOUT_REMOVE, "IORING_OP_TIMEOUT_REMOVE", "5.5"},
	{sys.IORING_OP_ACCEPT, "IORING_OP_ACCEPT", "5.5"},
	{sys.IORING_OP_ASYNC_CANCEL, "IORING_OP_ASYNC_CANCEL", "5.5"},
	{sys.IORING_OP_LINK_TIMEOUT, "IORING_OP_LINK_TIMEOUT", "5.5"},
	{sys.IORING_OP_CONNECT, "IORING_OP_CONNECT", "5.5"},
	{sys.IORING_OP_CLOSE, "IORING_OP_CLOSE", "5.6"},
	{sys.IORING_OP_READ, "IORING_OP_READ", "5.6"},
	{sys.IORING_OP_WRITE, "IORING_OP_WRITE", "5.6"},
	{sys.IORING_OP_SEND, "IORING_OP_SEND", "5.6"},
	{sys.IORING_OP_RECV, "IORING_OP_RECV", "5.6"},
	{sys.IORING_OP_SHUTDOWN, "IORING_OP_SHUTDOWN", "5.11"},
	{sys.IORING_OP_MSG_RING, "IORING_OP_MSG_RING", "5.18"},
	{sys.IORING_OP_SOCKET, "IORING_OP_SOCKET", "5.19"},
	// The opcode is 6.0, but PrepSendZC asks for the usage report
	// (IORING_SEND_ZC_REPORT_USAGE), which 6.0 and 6.1 refuse: Probe
	// reports it supported only when a PrepSendZC send works.
	{sys.IORING_OP_SEND_ZC, "IORING_OP_SEND_ZC", "6.2"},
	{sys.IORING_OP_SENDMSG_ZC, "IORING_OP_SENDMSG_ZC", "6.1"},
	{sys.IORING_OP_BIND, "IORING_OP_BIND", "6.11"},
	{sys.IORING_OP_LISTEN, "IORING_OP_LISTEN", "6.11"},
	{sys.IORING_OP_RECV_ZC, "IORING_OP_RECV_ZC", "6.15"},
}

// setupFlag names an IORING_SETUP_* flag and the kernel that added it, oldest
// first. needs holds the flags the kernel refuses it without.
type setupFlag struct {
	name  string
	flag  uint32
	min   string
	needs uint32
}

var setupFlags = []setupFlag{
	{"IORING_SETUP_SQPOLL", sys.IORING_SETUP_SQPOLL, "5.1", 0},
	{"IORING_SETUP_SQ_AFF", sys.IORING_SETUP_SQ_AFF, "5.1", sys.IORING_SETUP_SQPOLL},
	{"IORING_SETUP_CQSIZE", sys.IORING_SETUP_CQSIZE, "5.5", 0},
	{"IORING_SETUP_CLAMP", sys.IORING_SETUP_CLAMP, "5.6", 0},
	{"IORING_SETUP_ATTACH_WQ", sys.IORING_SETUP_ATTACH_WQ, "5.6", 0},
	{"IORING_SETUP_COOP_TASKRUN", sys.IORING_SETUP_COOP_TASKRUN, "5.19", 0},
	{"IORING_SETUP_TASKRUN_FLAG", sys.IORING_SETUP_TASKRUN_FLAG, "5.19", sys.IORING_SETUP_COOP_TASKRUN},
	{"IORING_SETUP_SINGLE_ISSUER", sys.IORING_SETUP_SINGLE_ISSUER, "6.0", 0},
	{"IORING_SETUP_DEFER_TASKRUN", sys.IORING_SETUP_DEFER_TASKRUN, "6.1", sys.IORING_SETUP_SINGLE_ISSUER},
	{"IORING_SETUP_NO_SQARRAY", sys.IORING_SETUP_NO_SQARRAY, "6.6", 0},
}

// kernelFeats are IORING_FEAT_* bits Probe reports.
var kernelFeats = []struct {
	name string
	bit  uint32
	min  string
}{
	{"IORING_FEAT_NODROP", sys.IORING_FEAT_NODROP, "5.5"},
	{"IORING_FEAT_FAST_POLL", sys.IORING_FEAT_FAST_POLL, "5.7"},
	{"IORING_FEAT_EXT_ARG", sys.IORING_FEAT_EXT_ARG, "5.11"},
	{"IORING_FEAT_CQE_SKIP", sys.IORING_FEAT_CQE_SKIP, "5.17"},
	{"IORING_FEAT_RECVSEND_BUNDLE", sys.IORING_FEAT_RECVSEND_BUNDLE, "6.10"},
	{"IORING_FEAT_MIN_TIMEOUT", sys.IORING_FEAT_MIN_TIMEOUT, "6.12"},
}

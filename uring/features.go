package uring

import "github.com/spindlenet/spindle/internal/sys"

// setupFlag names an IORING_SETUP_* flag and the kernel that added it, oldest
// first.
type setupFlag struct {
	name string
	flag uint32
	min  string
}

var setupFlags = []setupFlag{
	{"IORING_SETUP_SQPOLL", sys.IORING_SETUP_SQPOLL, "5.1"},
	{"IORING_SETUP_SQ_AFF", sys.IORING_SETUP_SQ_AFF, "5.1"},
	{"IORING_SETUP_CQSIZE", sys.IORING_SETUP_CQSIZE, "5.5"},
	{"IORING_SETUP_CLAMP", sys.IORING_SETUP_CLAMP, "5.6"},
	{"IORING_SETUP_ATTACH_WQ", sys.IORING_SETUP_ATTACH_WQ, "5.6"},
	{"IORING_SETUP_COOP_TASKRUN", sys.IORING_SETUP_COOP_TASKRUN, "5.19"},
	{"IORING_SETUP_TASKRUN_FLAG", sys.IORING_SETUP_TASKRUN_FLAG, "5.19"},
	{"IORING_SETUP_SINGLE_ISSUER", sys.IORING_SETUP_SINGLE_ISSUER, "6.0"},
	{"IORING_SETUP_DEFER_TASKRUN", sys.IORING_SETUP_DEFER_TASKRUN, "6.1"},
	{"IORING_SETUP_NO_SQARRAY", sys.IORING_SETUP_NO_SQARRAY, "6.6"},
}

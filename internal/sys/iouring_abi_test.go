package sys

import (
	"testing"
	"unsafe"
)

// TestABILayout checks sizes and field offsets against
// include/uapi/linux/io_uring.h (Linux 6.18).
func TestABILayout(t *testing.T) {
	var sqe SQE
	var p Params
	var cqe CQE
	var br BufEntry
	var napi NAPI
	var probe Probe
	var ga GeteventsArg
	var msg Msghdr
	tests := []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"sizeof(io_uring_sqe)", unsafe.Sizeof(sqe), 64},
		{"sqe.fd", unsafe.Offsetof(sqe.Fd), 4},
		{"sqe.off", unsafe.Offsetof(sqe.Off), 8},
		{"sqe.addr", unsafe.Offsetof(sqe.Addr), 16},
		{"sqe.len", unsafe.Offsetof(sqe.Len), 24},
		{"sqe.rw_flags", unsafe.Offsetof(sqe.OpFlags), 28},
		{"sqe.user_data", unsafe.Offsetof(sqe.UserData), 32},
		{"sqe.buf_index", unsafe.Offsetof(sqe.BufIndex), 40},
		{"sqe.personality", unsafe.Offsetof(sqe.Personality), 42},
		{"sqe.file_index", unsafe.Offsetof(sqe.FileIndex), 44},
		{"sqe.addr3", unsafe.Offsetof(sqe.Addr3), 48},
		{"sizeof(io_uring_cqe)", unsafe.Sizeof(cqe), 16},
		{"cqe.res", unsafe.Offsetof(cqe.Res), 8},
		{"cqe.flags", unsafe.Offsetof(cqe.Flags), 12},
		{"sizeof(io_uring_params)", unsafe.Sizeof(p), 120},
		{"params.wq_fd", unsafe.Offsetof(p.WQFd), 24},
		{"params.sq_off", unsafe.Offsetof(p.SQOff), 40},
		{"params.cq_off", unsafe.Offsetof(p.CQOff), 80},
		{"sizeof(io_sqring_offsets)", unsafe.Sizeof(p.SQOff), 40},
		{"sizeof(io_cqring_offsets)", unsafe.Sizeof(p.CQOff), 40},
		{"sizeof(io_uring_buf)", unsafe.Sizeof(br), 16},
		{"io_uring_buf.bid", unsafe.Offsetof(br.Bid), 12},
		{"io_uring_buf_ring.tail", unsafe.Offsetof(br.Resv), 14},
		{"sizeof(io_uring_buf_reg)", unsafe.Sizeof(BufReg{}), 40},
		{"sizeof(io_uring_buf_status)", unsafe.Sizeof(BufStatus{}), 40},
		{"sizeof(io_uring_napi)", unsafe.Sizeof(napi), 16},
		{"napi.opcode", unsafe.Offsetof(napi.Opcode), 5},
		{"napi.op_param", unsafe.Offsetof(napi.OpParam), 8},
		{"sizeof(io_uring_probe)", unsafe.Offsetof(probe.Ops), 16},
		{"sizeof(io_uring_probe_op)", unsafe.Sizeof(ProbeOp{}), 8},
		{"sizeof(io_uring_getevents_arg)", unsafe.Sizeof(ga), 24},
		{"getevents_arg.ts", unsafe.Offsetof(ga.Ts), 16},
		{"sizeof(__kernel_timespec)", unsafe.Sizeof(Timespec{}), 16},
		{"sizeof(io_uring_rsrc_register)", unsafe.Sizeof(RsrcRegister{}), 32},
		{"sizeof(io_uring_rsrc_update)", unsafe.Sizeof(RsrcUpdate{}), 16},
		{"sizeof(io_uring_rsrc_update2)", unsafe.Sizeof(RsrcUpdate2{}), 32},
		{"sizeof(io_uring_file_index_range)", unsafe.Sizeof(FileIndexRange{}), 16},
		{"sizeof(io_uring_recvmsg_out)", unsafe.Sizeof(RecvmsgOut{}), 16},
		{"sizeof(struct iovec)", unsafe.Sizeof(Iovec{}), 16},
		{"sizeof(struct msghdr)", unsafe.Sizeof(msg), 56},
		{"msghdr.msg_iov", unsafe.Offsetof(msg.Iov), 16},
		{"msghdr.msg_flags", unsafe.Offsetof(msg.Flags), 48},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

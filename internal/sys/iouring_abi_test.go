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
	var breg BufReg
	var u2 RsrcUpdate2
	var rr RsrcRegister
	var rout RecvmsgOut
	var pop ProbeOp
	tests := []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"sizeof(io_uring_sqe)", unsafe.Sizeof(sqe), 64},
		{"sqe.flags", unsafe.Offsetof(sqe.Flags), 1},
		{"sqe.ioprio", unsafe.Offsetof(sqe.Ioprio), 2},
		{"sqe.__pad2", unsafe.Offsetof(sqe.Pad2), 56},
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
		{"params.cq_entries", unsafe.Offsetof(p.CQEntries), 4},
		{"params.flags", unsafe.Offsetof(p.Flags), 8},
		{"params.sq_thread_cpu", unsafe.Offsetof(p.SQThreadCPU), 12},
		{"params.sq_thread_idle", unsafe.Offsetof(p.SQThreadIdle), 16},
		{"params.features", unsafe.Offsetof(p.Features), 20},
		{"sizeof(io_sqring_offsets)", unsafe.Sizeof(p.SQOff), 40},
		{"sq_off.ring_mask", unsafe.Offsetof(p.SQOff.RingMask), 8},
		{"sq_off.flags", unsafe.Offsetof(p.SQOff.Flags), 16},
		{"sq_off.dropped", unsafe.Offsetof(p.SQOff.Dropped), 20},
		{"sq_off.array", unsafe.Offsetof(p.SQOff.Array), 24},
		{"sq_off.user_addr", unsafe.Offsetof(p.SQOff.UserAddr), 32},
		{"sizeof(io_cqring_offsets)", unsafe.Sizeof(p.CQOff), 40},
		{"cq_off.overflow", unsafe.Offsetof(p.CQOff.Overflow), 16},
		{"cq_off.cqes", unsafe.Offsetof(p.CQOff.CQEs), 20},
		{"cq_off.flags", unsafe.Offsetof(p.CQOff.Flags), 24},
		{"cq_off.user_addr", unsafe.Offsetof(p.CQOff.UserAddr), 32},
		{"sizeof(io_uring_buf)", unsafe.Sizeof(br), 16},
		{"io_uring_buf.bid", unsafe.Offsetof(br.Bid), 12},
		{"io_uring_buf_ring.tail", unsafe.Offsetof(br.Resv), 14},
		{"sizeof(io_uring_buf_reg)", unsafe.Sizeof(breg), 40},
		{"buf_reg.ring_entries", unsafe.Offsetof(breg.RingEntries), 8},
		{"buf_reg.bgid", unsafe.Offsetof(breg.Bgid), 12},
		{"buf_reg.flags", unsafe.Offsetof(breg.Flags), 14},
		{"sizeof(io_uring_buf_status)", unsafe.Sizeof(BufStatus{}), 40},
		{"sizeof(io_uring_napi)", unsafe.Sizeof(napi), 16},
		{"napi.opcode", unsafe.Offsetof(napi.Opcode), 5},
		{"napi.op_param", unsafe.Offsetof(napi.OpParam), 8},
		{"sizeof(io_uring_probe)", unsafe.Offsetof(probe.Ops), 16},
		{"sizeof(io_uring_probe_op)", unsafe.Sizeof(pop), 8},
		{"probe_op.flags", unsafe.Offsetof(pop.Flags), 2},
		{"probe.ops_len", unsafe.Offsetof(probe.OpsLen), 1},
		{"sizeof(io_uring_getevents_arg)", unsafe.Sizeof(ga), 24},
		{"getevents_arg.sigmask_sz", unsafe.Offsetof(ga.SigmaskSz), 8},
		{"getevents_arg.min_wait_usec", unsafe.Offsetof(ga.MinWaitUsec), 12},
		{"getevents_arg.ts", unsafe.Offsetof(ga.Ts), 16},
		{"sizeof(__kernel_timespec)", unsafe.Sizeof(Timespec{}), 16},
		{"sizeof(io_uring_rsrc_register)", unsafe.Sizeof(rr), 32},
		{"rsrc_register.flags", unsafe.Offsetof(rr.Flags), 4},
		{"rsrc_register.data", unsafe.Offsetof(rr.Data), 16},
		{"rsrc_register.tags", unsafe.Offsetof(rr.Tags), 24},
		{"sizeof(io_uring_rsrc_update)", unsafe.Sizeof(RsrcUpdate{}), 16},
		{"sizeof(io_uring_rsrc_update2)", unsafe.Sizeof(u2), 32},
		{"rsrc_update2.data", unsafe.Offsetof(u2.Data), 8},
		{"rsrc_update2.tags", unsafe.Offsetof(u2.Tags), 16},
		{"rsrc_update2.nr", unsafe.Offsetof(u2.Nr), 24},
		{"sizeof(io_uring_sync_cancel_reg)", unsafe.Sizeof(SyncCancelReg{}), 64},
		{"sync_cancel_reg.fd", unsafe.Offsetof(SyncCancelReg{}.Fd), 8},
		{"sync_cancel_reg.flags", unsafe.Offsetof(SyncCancelReg{}.Flags), 12},
		{"sync_cancel_reg.timeout", unsafe.Offsetof(SyncCancelReg{}.Timeout), 16},
		{"sync_cancel_reg.opcode", unsafe.Offsetof(SyncCancelReg{}.Opcode), 32},
		{"sync_cancel_reg.pad2", unsafe.Offsetof(SyncCancelReg{}.Pad2), 40},
		{"sizeof(io_uring_file_index_range)", unsafe.Sizeof(FileIndexRange{}), 16},
		{"sizeof(io_uring_recvmsg_out)", unsafe.Sizeof(rout), 16},
		{"recvmsg_out.payloadlen", unsafe.Offsetof(rout.Payloadlen), 8},
		{"sizeof(struct iovec)", unsafe.Sizeof(Iovec{}), 16},
		{"sizeof(struct msghdr)", unsafe.Sizeof(msg), 56},
		{"msghdr.msg_namelen", unsafe.Offsetof(msg.Namelen), 8},
		{"msghdr.msg_iov", unsafe.Offsetof(msg.Iov), 16},
		{"msghdr.msg_iovlen", unsafe.Offsetof(msg.Iovlen), 24},
		{"msghdr.msg_control", unsafe.Offsetof(msg.Control), 32},
		{"msghdr.msg_flags", unsafe.Offsetof(msg.Flags), 48},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

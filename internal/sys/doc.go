// Package sys is the only place in spindle that imports unsafe or makes raw
// io_uring system calls. It holds the io_uring ABI (structs and IORING_*
// constants, each citing include/uapi/linux/io_uring.h of Linux 6.18), the raw
// setup/enter/register calls, and off-heap memory helpers (mmap, huge pages,
// mbind) with a registry of the live mappings (OffHeap), which package uring
// consults before any address reaches an SQE. Everything else in spindle goes through package uring or through
// the memory helpers here.
//
// The fence is enforced by TestImportFence in this package and by depguard in
// .golangci.yaml.
package sys

package proxy

import "golang.org/x/sys/unix"

// unsent returns the bytes of the socket fd's send queue that its peer has
// not acknowledged yet (SIOCOUTQ), 0 where unknown: with the write queue's
// Buffered, how much of what was written has yet to reach a client. Loop
// goroutine.
func unsent(fd int) int {
	if fd < 0 {
		return 0
	}
	n, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
	if err != nil {
		return 0
	}
	return n
}

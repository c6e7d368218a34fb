//go:build unix

package kver

import "golang.org/x/sys/unix"

// Release is the running kernel's release (uname -r), "" if uname fails.
func Release() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

//go:build !unix

package kver

// Release is "" where there is no uname.
func Release() string { return "" }

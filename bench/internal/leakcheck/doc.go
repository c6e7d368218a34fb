// Package leakcheck is the TestMain of the bench packages: it fails a test
// binary whose tests leave file descriptors or goroutines behind.
package leakcheck

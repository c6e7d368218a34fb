// Package testnet holds network fixtures shared by spindle's tests. It is
// imported by tests only.
package testnet

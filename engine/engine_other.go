//go:build !linux

package engine

import (
	"crypto/tls"
	"time"
)

// New returns ErrNotSupported: the engine needs Linux. Any goroutine.
func New(cfg *Config, h Handler) (*Engine, error) { return nil, ErrNotSupported }

func (l *Loop) wakeLocked() {}

func (l *Loop) run(errc chan<- error) { errc <- ErrNotSupported }

// Listen returns ErrNotSupported. Any goroutine.
func (e *Engine) Listen(network, address string, lc *ListenConfig) (*Listener, error) {
	return nil, ErrNotSupported
}

// Close returns ErrNotSupported. Any goroutine.
func (ln *Listener) Close() error { return ErrNotSupported }

func (ln *Listener) close(bool) error { return ErrNotSupported }

// Dial returns ErrNotSupported. Loop goroutine.
func (l *Loop) Dial(network, address string, timeout time.Duration) (*Conn, error) {
	return nil, ErrNotSupported
}

// DialTLS returns ErrNotSupported. Loop goroutine.
func (l *Loop) DialTLS(network, address string, timeout time.Duration, cfg *tls.Config) (*Conn, error) {
	return nil, ErrNotSupported
}

func (l *Loop) closeWakeFd() {}

func onAnyLoop() bool { return false }

// threadCPU returns 0 outside Linux, where no loop runs.
func threadCPU() int64 { return 0 }

// Unacked returns 0 outside Linux, where no connection is open.
func (c *Conn) Unacked() int { return 0 }

// unread returns 0 outside Linux, where no connection is open.
func (c *Conn) unread() int { return 0 }

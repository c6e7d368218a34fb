//go:build !linux

package main

import "errors"

func loopbackNAPIID() (int, error) { return 0, errors.New("not supported on this system") }

func ethtoolDriver(string) string { return "" }

func epollBusyPollErr() error { return errors.New("not supported on this system") }

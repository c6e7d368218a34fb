package sys

import (
	"fmt"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestEpollParamsSize(t *testing.T) {
	if got := unsafe.Sizeof(EpollParams{}); got != SizeofEpollParams {
		t.Fatalf("sizeof(EpollParams) = %d, want %d", got, SizeofEpollParams)
	}
}

func TestEpollParamsRoundTrip(t *testing.T) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := EpollGetParams(fd); err != nil {
		var u unix.Utsname
		unix.Uname(&u)
		var major, minor int
		fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
		if major > 6 || major == 6 && minor >= 9 {
			t.Fatalf("EPIOCGPARAMS failed on Linux %d.%d (has it since 6.9): %v", major, minor, err)
		}
		t.Skipf("EPIOCGPARAMS not supported (requires >= 6.9): %v", err)
	}
	tests := []EpollParams{
		{BusyPollUsecs: 50, BusyPollBudget: 8, PreferBusyPoll: 1},
		{BusyPollUsecs: 0, BusyPollBudget: 0, PreferBusyPoll: 0},
	}
	for _, want := range tests {
		if err := EpollSetParams(fd, &want); err != nil {
			t.Fatalf("EpollSetParams(%+v): %v", want, err)
		}
		got, err := EpollGetParams(fd)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
	bad := EpollParams{PreferBusyPoll: 2}
	if err := EpollSetParams(fd, &bad); err == nil {
		t.Fatal("prefer_busy_poll=2 accepted; want EINVAL")
	}
}

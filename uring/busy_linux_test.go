package uring

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// sysIOURingEnter is the number of io_uring_enter, the same on every
// architecture (include/uapi/asm-generic/unistd.h, 426).
const sysIOURingEnter = 426

// TestEnterBusy covers what Linux 6.18 never produced here, even with a
// million overflowed completions: io_uring_enter failing with EBUSY or
// EAGAIN (the kernel cannot take more before completions are reaped). A
// child process (a seccomp filter cannot be lifted) makes every
// io_uring_enter fail with that errno and checks that Submit reports it as
// a unix.Errno, and that SubmitAndWait, with nothing to reap, retries once
// without submitting and then reports it too, leaving the SQEs queued.
func TestEnterBusy(t *testing.T) {
	needFeatures(t, "IORING_SETUP_SINGLE_ISSUER", "IORING_SETUP_DEFER_TASKRUN") // the child's ring
	for _, errno := range []unix.Errno{unix.EBUSY, unix.EAGAIN} {
		t.Run(errno.Error(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEnterBusy$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "SPINDLE_ENTER_BUSY_CHILD="+strconv.Itoa(int(errno)))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if !bytes.Contains(out, []byte("enter busy ok")) {
				t.Fatalf("child did not report:\n%s", out)
			}
		})
	}
}

// TestHelperEnterBusy is the child process of TestEnterBusy.
func TestHelperEnterBusy(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("SPINDLE_ENTER_BUSY_CHILD"))
	if err != nil {
		t.Skip("helper process for TestEnterBusy")
	}
	errno := unix.Errno(n)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := New(&Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := sys.DenySyscall(sysIOURingEnter, errno); err != nil {
		t.Fatalf("DenySyscall: %v", err)
	}
	for i := range 3 {
		r.GetSQE().PrepNop(uint64(i))
	}
	n, err = r.Submit()
	if !errors.Is(err, errno) || n != 0 {
		t.Fatalf("Submit: %d, %v; want 0, %v", n, err, errno)
	}
	if _, ok := err.(unix.Errno); !ok {
		t.Fatalf("Submit error %T, want unix.Errno", err)
	}
	before := r.EnterCount()
	n, err = r.SubmitAndWait(1, 0)
	if !errors.Is(err, errno) || n != 0 {
		t.Fatalf("SubmitAndWait: %d, %v; want 0, %v", n, err, errno)
	}
	if got := r.EnterCount() - before; got != 2 {
		t.Errorf("SubmitAndWait made %d io_uring_enter calls, want 2 (submit, then wait without submitting)", got)
	}
	if p := r.SQReady(); p != 3 {
		t.Errorf("%d SQEs still queued, want 3", p)
	}
	t.Log("enter busy ok")
}

// TestSubmitAndWaitRefusedWaitsForOne: a SubmitAndWait whose submission the
// kernel refuses (EAGAIN: no request could be allocated; EBUSY) with the CQ
// empty waits without submitting. waitNr counted the completions of the
// SQEs it was to submit, which cannot come: it must return at the first
// completion, which frees what the kernel lacked, so that the caller reaps
// and submits again. A loop waiting for its quiet SENDs' completions
// (engine) slept on past it, and past every completion after it up to
// waitNr. A child process refuses every io_uring_enter that submits; a
// poll armed before completes when a pipe is written.
func TestSubmitAndWaitRefusedWaitsForOne(t *testing.T) {
	needFeatures(t, "IORING_SETUP_SINGLE_ISSUER", "IORING_SETUP_DEFER_TASKRUN") // the child's ring
	for _, errno := range []unix.Errno{unix.EBUSY, unix.EAGAIN} {
		t.Run(errno.Error(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSubmitRefused$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "SPINDLE_SUBMIT_REFUSED_CHILD="+strconv.Itoa(int(errno)))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if !bytes.Contains(out, []byte("submit refused ok")) {
				t.Fatalf("child did not report:\n%s", out)
			}
		})
	}
}

// TestHelperSubmitRefused is the child process of
// TestSubmitAndWaitRefusedWaitsForOne.
func TestHelperSubmitRefused(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("SPINDLE_SUBMIT_REFUSED_CHILD"))
	if err != nil {
		t.Skip("helper process for TestSubmitAndWaitRefusedWaitsForOne")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := New(&Config{Entries: 8, SingleIssuer: true, DeferTaskrun: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	r.GetSQE().PrepPollAdd(p[0], unix.POLLIN, false, 9)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if err := sys.DenySyscallWithArg(sysIOURingEnter, 1, unix.Errno(n)); err != nil {
		t.Fatalf("DenySyscallWithArg: %v", err)
	}
	for i := range 3 {
		r.GetSQE().PrepNop(uint64(i))
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		unix.Write(p[1], []byte{1})
	}()
	// The timeout is a guard: before, the wait ended only with it.
	t0 := time.Now()
	_, err = r.SubmitAndWait(4, 3*time.Second)
	if d := time.Since(t0); err != nil || r.CQReady() != 1 {
		t.Fatalf("SubmitAndWait(4) with its 3 SQEs refused: %v after %v, %d completions ready; want to return at the poll's", err, d, r.CQReady())
	}
	if q := r.SQReady(); q != 3 {
		t.Errorf("%d SQEs still queued, want 3", q)
	}
	t.Log("submit refused ok")
}

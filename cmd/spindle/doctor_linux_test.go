package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/hugetlb"
	"github.com/spindlenet/spindle/internal/kver"
	"github.com/spindlenet/spindle/internal/memlocktest"
	"github.com/spindlenet/spindle/internal/sys"
	"github.com/spindlenet/spindle/internal/veth"
	"github.com/spindlenet/spindle/topo"
	"github.com/spindlenet/spindle/uring"
)

// doctorJSON runs doctor --json, decodes its report into rep and returns
// the report as printed.
func doctorJSON(t *testing.T, rep any) string {
	t.Helper()
	var out bytes.Buffer
	if err := doctor(context.Background(), []string{"--json"}, &out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), rep); err != nil {
		t.Fatalf("doctor --json is not JSON: %v\n%s", err, out.String())
	}
	return out.String()
}

func TestDoctorJSON(t *testing.T) {
	var rep struct {
		Kernel  string `json:"kernel"`
		IOUring struct {
			Available bool `json:"available"`
			Features  []struct {
				Name      string `json:"name"`
				Supported bool   `json:"supported"`
			} `json:"features"`
		} `json:"io_uring"`
		Interfaces []struct {
			Name              string `json:"name"`
			SocketsGetNAPIIDs bool   `json:"sockets_get_napi_ids"`
			Reason            string `json:"reason"`
		} `json:"interfaces"`
	}
	out := doctorJSON(t, &rep)
	if rep.Kernel == "" || !rep.IOUring.Available {
		t.Fatalf("report: %s", out)
	}
	want := map[string]bool{"IORING_REGISTER_NAPI": false, "multishot recv with buffer ring": false}
	for _, f := range rep.IOUring.Features {
		if _, ok := want[f.Name]; ok {
			want[f.Name] = f.Supported
		}
	}
	for name, ok := range want {
		if !ok {
			t.Errorf("%s not reported as supported", name)
		}
	}
	sawLo := false
	for _, i := range rep.Interfaces {
		if i.Name == "lo" {
			sawLo = true
			if i.SocketsGetNAPIIDs || !strings.Contains(i.Reason, "SO_INCOMING_NAPI_ID 0") {
				t.Errorf("loopback: %+v, want no NAPI ids measured on a socket", i)
			}
		}
	}
	if !sawLo {
		t.Error("no loopback interface in the report")
	}
}

func TestDoctorText(t *testing.T) {
	var out bytes.Buffer
	if err := doctor(context.Background(), nil, &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"kernel", "io_uring features:", "IORING_REGISTER_NAPI", "interfaces (do sockets get NAPI ids?):", "lo"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, out.String())
		}
	}
}

// TestDoctorVethTSONote: a veth's NAPI ids reach TCP sockets only with TSO
// off on the sender, and doctor says so of every veth, whatever its name.
// It went by the name's "veth" prefix or topo's Driver, which is "" for a
// virtual device, so the bench's veths (sp<tag><pid>a) had no note. Doctor
// runs here under ip netns exec in a namespace holding one end of a veth
// pair named that way, which mounts that namespace's sysfs.
func TestDoctorVethTSONote(t *testing.T) {
	if err := veth.Requirements(); err != nil {
		var te *veth.ToolError
		if errors.As(err, &te) {
			t.Skipf("needs %s (apt-get install iproute2 ethtool)", te.Tool)
		}
		t.Skipf("a veth pair between network namespaces, for doctor to report on: %v", err)
	}
	p, err := veth.New(veth.Config{Tag: "doc", AddrA: "10.213.9.1/30", AddrB: "10.213.9.2/30"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if strings.HasPrefix(p.DevA, "veth") {
		t.Fatalf("veth end %q is named veth*: the test needs another name", p.DevA)
	}
	doc := spindleCmd("doctor", "--json")
	cmd := exec.Command("ip", append([]string{"netns", "exec", p.NSA}, doc.Args...)...)
	cmd.Env = doc.Env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("doctor in %s: %v\n%s", p.NSA, err, out)
	}
	var rep struct {
		Interfaces []doctorIface `json:"interfaces"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("doctor --json is not JSON: %v\n%s", err, out)
	}
	i := slices.IndexFunc(rep.Interfaces, func(i doctorIface) bool { return i.Name == p.DevA })
	if i < 0 {
		t.Fatalf("no %s in the report:\n%s", p.DevA, out)
	}
	if d := rep.Interfaces[i]; !d.SocketsGetNAPIIDs || !strings.Contains(d.Reason, "TSO off on the sender") {
		t.Errorf("%s: %+v, want NAPI ids with the TSO note", p.DevA, d)
	}
}

// TestDoctorIncompleteFails: a report doctor could not complete (the
// host's topology unreadable, as with /sys hidden) is printed, with the
// error, and doctor fails (exit 1), where it printed "error:" and exited
// 0, which a script checking the host took for a pass.
func TestDoctorIncompleteFails(t *testing.T) {
	defer func(f func() (*topo.Host, error)) { readLiveHost = f }(readLiveHost)
	readLiveHost = func() (*topo.Host, error) {
		return nil, errors.New("topo: online cpus: open /sys/devices/system/cpu/online: no such file or directory")
	}
	for _, args := range [][]string{nil, {"--json"}} {
		var out bytes.Buffer
		err := doctor(context.Background(), args, &out)
		if err == nil || !strings.Contains(err.Error(), "online cpus") {
			t.Errorf("doctor %v: %v, want an error naming what could not be read", args, err)
		}
		if !strings.Contains(out.String(), "online cpus") {
			t.Errorf("doctor %v printed no report with the error:\n%s", args, out.String())
		}
	}
}

// noPoolPageFree matches doctor's warning that the hugetlb pool has no
// free page.
var noPoolPageFree = regexp.MustCompile(`none of the [0-9]+ hugetlb pages`)

// TestDoctorBufferPagesAsTheEngineGetsThem: doctor says which pages the
// engine's buffers get, by mapping one huge page as the engine does, and
// warns where they are not hugetlb. It went by the pool's size alone:
// with a pool whose pages were all taken it said nothing (the engine got
// THP), and with no pool it said THP where the process was denied THP
// (prctl PR_SET_THP_DISABLE: the engine got 4 KiB pages).
func TestDoctorBufferPagesAsTheEngineGetsThem(t *testing.T) {
	report := func(t *testing.T) (pages string, warnings []string) {
		t.Helper()
		var rep struct {
			BufferPages string   `json:"buffer_pages"`
			Warnings    []string `json:"warnings"`
		}
		doctorJSON(t, &rep)
		return rep.BufferPages, rep.Warnings
	}
	// engineGets is what the engine's buffers get now.
	engineGets := func(t *testing.T) uring.PageKind {
		t.Helper()
		b, kind, err := uring.MapAnon(1, true)
		if err != nil {
			t.Fatal(err)
		}
		uring.Unmap(b)
		return kind
	}
	warned := func(warnings []string, s string) bool {
		return slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, s) })
	}

	t.Run("pool pages all taken", func(t *testing.T) {
		pool := hugetlb.Grow(t, sys.HugePageSize(), 1)
		pool.Take(func() bool {
			held, kind, err := uring.MapAnon(1, true)
			if err != nil {
				t.Fatal(err)
			}
			defer uring.Unmap(held)
			if kind != uring.PageHuge {
				return false // another process took the page
			}
			want := engineGets(t)
			pages, warnings := report(t)
			// Any number: another package's test may have grown the
			// pool beside this one, and taken its pages too.
			if pages != want.String() || !slices.ContainsFunc(warnings, noPoolPageFree.MatchString) {
				t.Errorf("buffer pages %q, warnings %q; want %q and a warning that no pool page is free", pages, warnings, want)
			}
			return true
		})
	})

	t.Run("THP denied by prctl", func(t *testing.T) {
		if engineGets(t) == uring.PageHuge {
			t.Skip("the hugetlb pool has a free page: the engine gets it, THP or not")
		}
		if was, err := unix.PrctlRetInt(unix.PR_GET_THP_DISABLE, 0, 0, 0, 0); err != nil || was != 0 {
			t.Skipf("PR_GET_THP_DISABLE: %d, %v; want 0 to set it and put it back", was, err)
		}
		if err := unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0); err != nil {
			t.Fatal(os.NewSyscallError("prctl", err))
		}
		defer func() {
			if err := unix.Prctl(unix.PR_SET_THP_DISABLE, 0, 0, 0, 0); err != nil {
				t.Errorf("putting back PR_SET_THP_DISABLE: %v", err)
			}
		}()
		pages, warnings := report(t)
		if want := engineGets(t); pages != want.String() || !warned(warnings, "buffers use 4 KiB pages") {
			t.Errorf("buffer pages %q, warnings %q; want %q and a warning that buffers use 4 KiB pages", pages, warnings, want)
		}
	})
}

// TestDoctorEpollBusyPoll: doctor says whether the epoll-busypoll backend
// can run (EPIOCGPARAMS, 6.9), which engine.New probes before it falls
// back to plain epoll. It said nothing of it, though its warning for a
// host without io_uring sends uring-napi there "where that works".
func TestDoctorEpollBusyPoll(t *testing.T) {
	var rep struct {
		EpollBusyPoll bool     `json:"epoll_busy_poll"`
		Warnings      []string `json:"warnings"`
	}
	doctorJSON(t, &rep)
	warned := slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.Contains(w, "EPIOCGPARAMS") })
	if !kver.AtLeast(kver.Release(), "6.9") {
		if rep.EpollBusyPoll || !warned {
			t.Errorf("kernel %s (epoll busy-poll parameters need >= 6.9): epoll_busy_poll %v, warnings %q; want false and a warning", kver.Release(), rep.EpollBusyPoll, rep.Warnings)
		}
		t.Skipf("epoll busy-poll parameters not supported (requires >= 6.9, kernel %s): the warning checked", kver.Release())
	}
	if !rep.EpollBusyPoll || warned {
		t.Errorf("kernel %s: epoll_busy_poll %v, warnings %q; want true and no warning", kver.Release(), rep.EpollBusyPoll, rep.Warnings)
	}
}

// TestDoctorMemlockAsTheEngineNeedsIt runs doctor without CAP_IPC_LOCK
// (setpriv) under a locked-memory limit (prlimit) and checks its memlock
// warning against what the engine takes (engine.LockedMemory): the
// kernel charges io_uring's rings and buffer rings to RLIMIT_MEMLOCK, a
// default loop some 208 KiB. Doctor warned below a fixed 64 MiB, of
// "large fixed buffers" the engine registers only for SEND_ZC (off by
// default): so under the kernel's default of 8 MiB, where two loops have
// room to spare, and not by how much a smaller limit fell short.
func TestDoctorMemlockAsTheEngineNeedsIt(t *testing.T) {
	rings, err := engine.LockedMemory(nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	withZC, err := engine.LockedMemory(&engine.Config{SendZCThreshold: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	bin := spindleBin(t)
	for _, tc := range []struct {
		limit uint64
		args  []string
		want  string // in the memlock warning; "" for none
	}{
		{8 << 20, nil, ""},
		{rings, nil, ""},
		{rings - 4096, nil, fmt.Sprintf("below the %d KiB the io_uring rings and buffer rings of 2 loop(s)", rings>>10)},
		{64 << 10, nil, "ring setup fails with ENOMEM"},
		{rings, []string{"--send-zc"}, fmt.Sprintf("below the %d KiB that 2 loop(s) take from it with their send slabs registered", withZC>>10)},
		{withZC, []string{"--send-zc"}, ""},
	} {
		args := slices.Concat([]string{"doctor", "--json", "--loops", "2"}, tc.args)
		out, err := memlocktest.Command(t, tc.limit, bin, args...).Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var rep struct {
			Memlock  topo.Memlock `json:"memlock"`
			Warnings []string     `json:"warnings"`
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if rep.Memlock.CapIPCLock || rep.Memlock.Soft != tc.limit {
			t.Fatalf("%v: doctor saw %+v, want soft %d without CAP_IPC_LOCK", args, rep.Memlock, tc.limit)
		}
		i := slices.IndexFunc(rep.Warnings, func(w string) bool { return strings.Contains(w, "RLIMIT_MEMLOCK") })
		switch {
		case tc.want == "" && i >= 0:
			t.Errorf("limit %d KiB %v: warning %q, want none", tc.limit>>10, tc.args, rep.Warnings[i])
		case tc.want != "" && (i < 0 || !strings.Contains(rep.Warnings[i], tc.want)):
			t.Errorf("limit %d KiB %v: warnings %q, want one saying %q", tc.limit>>10, tc.args, rep.Warnings, tc.want)
		}
	}
}

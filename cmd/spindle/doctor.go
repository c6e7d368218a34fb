package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/topo"
	"github.com/spindlenet/spindle/uring"
)

func init() {
	register("doctor", "report kernel features, limits and NAPI availability (--json)", runDoctor)
}

// doctorReport is what `spindle doctor` prints.
type doctorReport struct {
	Kernel   string          `json:"kernel"`
	Disabled int             `json:"io_uring_disabled"`
	IOUring  *uring.Features `json:"io_uring"`
	// EpollBusyPoll says whether the epoll-busypoll backend can run here
	// (epoll busy-poll parameters, EPIOCGPARAMS, 6.9), probed as engine.New
	// probes it before it falls back to plain epoll.
	EpollBusyPoll bool            `json:"epoll_busy_poll"`
	Memlock       *topo.Memlock   `json:"memlock,omitempty"`
	HugePages     *topo.HugePages `json:"huge_pages,omitempty"`
	// BufferPages is the kind of pages a huge page of buffers got when
	// doctor mapped one as the engine maps its buffers (uring.MapAnon):
	// "hugetlb", "thp" or "4k" (Engine.BufferPages' names), "" where the
	// mapping failed.
	BufferPages string        `json:"buffer_pages,omitempty"`
	NUMA        []topo.Node   `json:"numa_nodes,omitempty"`
	Interfaces  []doctorIface `json:"interfaces"`
	Warnings    []string      `json:"warnings"`
	Errors      []string      `json:"errors,omitempty"`
}

// doctorIface says whether sockets on an interface get NAPI ids, which
// io_uring NAPI busy polling needs.
type doctorIface struct {
	Name    string   `json:"name"`
	Virtual bool     `json:"virtual"`
	NAPIIDs []uint32 `json:"napi_ids"`
	// SocketsGetNAPIIDs is true when the device has NAPI instances (or, for
	// loopback, when a live socket reported one).
	SocketsGetNAPIIDs bool   `json:"sockets_get_napi_ids"`
	Reason            string `json:"reason"`
}

func runDoctor(ctx context.Context, args []string) error {
	return doctor(ctx, args, os.Stdout)
}

func doctor(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	loops := fs.Int("loops", 0, "event loops the engine will run, for the locked-memory check (default: one per CPU this process may run on, the engine's default)")
	readBuffers := fs.Int("read-buffers", 0, "the engine's receive buffers per loop (engine.Config.ReadBuffers; default the engine's)")
	sendZC := fs.Bool("send-zc", false, "the engine registers its send slab for SEND_ZC (engine.Config.SendZCThreshold above 0)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *loops < 0 || *readBuffers < 0 {
		return usageError{err: errors.New("want --loops and --read-buffers not negative")}
	}
	if *loops == 0 {
		cpus, err := allowedCPUs()
		if err != nil {
			return err
		}
		*loops = len(cpus)
	}
	need := lockedNeed{loops: *loops}
	cfg := &engine.Config{ReadBuffers: *readBuffers}
	// LockedMemory's only errors are a Config that New refuses on any host
	// (of this one, --read-buffers above the engine's largest), and more
	// loops than its uint64 counts the bytes of (no host has that many
	// CPUs): usage errors. It reads nothing of the host but its page size.
	locked := func() (uint64, error) {
		if _, err := engine.LockedMemory(cfg, 1); err != nil {
			return 0, usageError{err: fmt.Errorf("--read-buffers: %w", err)}
		}
		n, err := engine.LockedMemory(cfg, *loops)
		if err != nil {
			return 0, usageError{err: fmt.Errorf("--loops: %w", err)}
		}
		return n, nil
	}
	var err error
	if need.rings, err = locked(); err != nil {
		return err
	}
	need.all = need.rings
	if *sendZC {
		cfg.SendZCThreshold = 1
		if need.all, err = locked(); err != nil {
			return err
		}
	}
	rep := buildDoctorReport(need)
	if *jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printDoctor(w, rep)
	}
	if len(rep.Errors) > 0 {
		// The report is printed, and incomplete: what could not be read
		// is a failure (exit 1), io_uring being unavailable a finding
		// (a warning).
		return fmt.Errorf("the report is incomplete: %s", strings.Join(rep.Errors, "; "))
	}
	return nil
}

// readLiveHost is topo.ReadLive; tests replace it.
var readLiveHost = topo.ReadLive

// buildDoctorReport reads the host, and judges its locked-memory limit
// against need.
func buildDoctorReport(need lockedNeed) *doctorReport {
	rep := &doctorReport{Disabled: -1, Warnings: []string{}, Interfaces: []doctorIface{}}
	f, err := uring.Probe()
	rep.IOUring = f
	if f != nil {
		rep.Kernel, rep.Disabled = f.Kernel, f.Disabled
	}
	rep.Warnings = append(rep.Warnings, ioUringWarnings(f, err)...)
	if err := epollBusyPollErr(); err != nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("epoll busy polling unavailable (EPIOCGPARAMS, requires >= 6.9: %v): the engine runs epoll-busypoll as plain epoll, and uring-napi without io_uring on plain epoll", err))
	} else {
		rep.EpollBusyPoll = true
	}
	h, err := readLiveHost()
	if err != nil {
		rep.Errors = append(rep.Errors, "host topology: "+err.Error())
		return rep
	}
	if rep.Kernel == "" {
		rep.Kernel = h.Kernel
	}
	rep.Memlock, rep.HugePages, rep.NUMA = &h.Memlock, &h.HugePages, h.Nodes
	if w := memlockWarning(h.Memlock, need); w != "" {
		rep.Warnings = append(rep.Warnings, w)
	}
	if w := bufferPagesWarning(rep, h.HugePages); w != "" {
		rep.Warnings = append(rep.Warnings, w)
	}
	anyNAPI := false
	for _, n := range h.NICs {
		d := doctorIface{Name: n.Name, Virtual: n.Virtual, NAPIIDs: []uint32{}}
		for _, x := range n.NAPIs {
			d.NAPIIDs = append(d.NAPIIDs, x.ID)
		}
		switch {
		case n.Name == "lo":
			id, err := loopbackNAPIID()
			d.SocketsGetNAPIIDs = err == nil && id >= 257
			switch {
			case err != nil:
				d.Reason = "loopback socket check failed: " + err.Error()
			case d.SocketsGetNAPIIDs:
				d.Reason = fmt.Sprintf("a loopback TCP socket reported NAPI id %d", id)
			default:
				d.Reason = "loopback has no NAPI: a loopback TCP socket reported SO_INCOMING_NAPI_ID 0, busy polling does nothing here"
			}
		case len(d.NAPIIDs) > 0:
			d.SocketsGetNAPIIDs = true
			d.Reason = fmt.Sprintf("%d NAPI instance(s) from netdev netlink", len(d.NAPIIDs))
			if ethtoolDriver(n.Name) == "veth" {
				d.Reason += "; TCP sockets get them only with TSO off on the sender"
			}
		case n.NAPIErr != "":
			d.Reason = "NAPI instances unknown: " + n.NAPIErr
		case n.Virtual:
			d.Reason = "no NAPI instances (virtual device; a veth has them only with GRO on)"
		default:
			d.Reason = "no NAPI instances reported by netdev netlink"
		}
		anyNAPI = anyNAPI || (d.SocketsGetNAPIIDs && n.Name != "lo")
		rep.Interfaces = append(rep.Interfaces, d)
	}
	if !anyNAPI {
		rep.Warnings = append(rep.Warnings, "no interface has NAPI ids: io_uring NAPI busy polling would register but change nothing")
	}
	return rep
}

// lockedNeed is the locked memory (engine.LockedMemory) the engine's
// loops take: rings for their rings and buffer rings, all with the send
// slab registered too (--send-zc; rings without).
type lockedNeed struct {
	loops      int
	rings, all uint64
}

// memlockWarning returns a warning when m, the locked-memory limit, is
// below what need says the engine's loops take from it, "" when it is not
// or does not apply (CAP_IPC_LOCK, no limit). The kernel charges io_uring's
// rings and buffer rings to it, not only registered buffers: a 64 KiB limit
// fails the first loop's ring setup, where an 8 MiB one (the kernel's
// default since 5.16) leaves room for some 39 default loops.
func memlockWarning(m topo.Memlock, need lockedNeed) string {
	if m.CapIPCLock || m.Soft == topo.Unlimited || m.Soft >= need.all {
		return ""
	}
	const shared = "the count is the user's: other processes of this user running io_uring without CAP_IPC_LOCK take from it too"
	const fix = "raise it (LimitMEMLOCK= in the systemd unit, ulimit -l) or grant CAP_IPC_LOCK"
	if m.Soft < need.rings {
		return fmt.Sprintf("RLIMIT_MEMLOCK is %d KiB without CAP_IPC_LOCK, below the %d KiB the io_uring rings and buffer rings of %d loop(s) take from it (%s): their ring setup fails with ENOMEM and the loops whose rings do not fit run epoll; %s", m.Soft>>10, need.rings>>10, need.loops, shared, fix)
	}
	return fmt.Sprintf("RLIMIT_MEMLOCK is %d KiB without CAP_IPC_LOCK, below the %d KiB that %d loop(s) take from it with their send slabs registered for SEND_ZC (%s): the registration fails with ENOMEM and the loops send without SEND_ZC; %s", m.Soft>>10, need.all>>10, need.loops, shared, fix)
}

// ioUringWarnings returns the warnings of uring.Probe's result f (err its
// error).
func ioUringWarnings(f *uring.Features, err error) []string {
	if err != nil {
		return []string{"io_uring unavailable (" + err.Error() + "): the engine falls back to epoll (uring-napi to epoll-busypoll where that works)"}
	}
	var w []string
	if f.Disabled == 1 {
		// The kernel lets a process create rings then only with
		// CAP_SYS_ADMIN or in the group kernel.io_uring_group names
		// (io_uring_allowed): doctor, run as root, has them, where the
		// service it checks for may not.
		w = append(w, "kernel.io_uring_disabled is 1: this process may create rings, but one without CAP_SYS_ADMIN and outside kernel.io_uring_group may not, and its engine falls back to epoll")
	}
	for _, name := range []string{uring.FeatMultishotRecv, uring.FeatMultishotAccept, uring.FeatNAPI} {
		if !f.Has(name) {
			w = append(w, f.Err(name).Error())
		}
	}
	// The engine's quiet SENDs (uring and uring-napi) rest on the kernel
	// failing a SEND cut short; where it does not, or the probe could not
	// tell, the engine goes without them, and says so at start.
	switch {
	case !f.Has(uring.FeatShortSendSkipCleared):
		w = append(w, fmt.Sprintf("%v: the engine sends no quiet SENDs (each SEND's completion wakes the loop)", f.Err(uring.FeatShortSendSkipCleared)))
	case !f.Has(uring.FeatShortSendLinkCut):
		w = append(w, fmt.Sprintf("%v: the engine sends quiet SENDs for one-segment replies only (a reply of several segments wakes the loop at its completions)", f.Err(uring.FeatShortSendLinkCut)))
	}
	return w
}

// bufferPagesWarning maps one huge page of memory as the engine maps its
// buffers, sets rep.BufferPages to the kind it got and returns a warning
// where that is not hugetlb ("" where it is). The pool's counts alone do
// not say: the engine falls back from hugetlb where the pool has no free
// page and where the process's hugetlb cgroup limit refuses the fault, and
// from THP where the process is denied it (prctl PR_SET_THP_DISABLE, which
// children inherit), whatever sysfs says.
func bufferPagesWarning(rep *doctorReport, hp topo.HugePages) string {
	b, kind, err := uring.MapAnon(1, true)
	if err != nil {
		return "could not map a huge page of buffers: " + err.Error()
	}
	uring.Unmap(b)
	rep.BufferPages = kind.String()
	if kind == uring.PageHuge {
		return ""
	}
	pool := fmt.Sprintf("/sys/kernel/mm/hugepages/hugepages-%dkB", hp.PageSize>>10)
	var why string
	switch {
	case hp.Total == 0:
		why = fmt.Sprintf("no hugetlb pages of %d KiB, the size buffers are mapped with (%s/nr_hugepages is 0)", hp.PageSize>>10, pool)
	case hp.Free == 0:
		why = fmt.Sprintf("none of the %d hugetlb pages of %d KiB is free (%s)", hp.Total, hp.PageSize>>10, pool)
	default:
		why = fmt.Sprintf("a free hugetlb page of %d KiB could not be reserved or faulted in (the pool's free pages reserved, or the hugetlb cgroup limit, hugetlb.<size>.max, reached)", hp.PageSize>>10)
	}
	if kind == uring.PageTHP {
		return fmt.Sprintf("%s: buffers use transparent huge pages (THP %s)", why, hp.THP)
	}
	return fmt.Sprintf("%s: buffers use 4 KiB pages (THP %s, or denied to this process by prctl PR_SET_THP_DISABLE)", why, hp.THP)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no "
}

func printDoctor(w io.Writer, rep *doctorReport) {
	fmt.Fprintf(w, "kernel             %s\n", rep.Kernel)
	fmt.Fprintf(w, "io_uring_disabled  %d\n", rep.Disabled)
	if rep.Memlock != nil {
		fmt.Fprintf(w, "memlock            soft %d KiB, hard %d KiB, CAP_IPC_LOCK %v\n", rep.Memlock.Soft>>10, rep.Memlock.Hard>>10, rep.Memlock.CapIPCLock)
	}
	if rep.HugePages != nil {
		fmt.Fprintf(w, "huge pages         %d total, %d free, %d KiB each, THP %s\n", rep.HugePages.Total, rep.HugePages.Free, rep.HugePages.PageSize>>10, rep.HugePages.THP)
	}
	if rep.BufferPages != "" {
		fmt.Fprintf(w, "buffer pages       %s (a huge page mapped as the engine maps its buffers)\n", rep.BufferPages)
	}
	for _, n := range rep.NUMA {
		fmt.Fprintf(w, "NUMA node %-8d CPUs %s\n", n.ID, n.CPUs)
	}
	fmt.Fprintf(w, "epoll busy poll    %s\n", strings.TrimSpace(yesNo(rep.EpollBusyPoll)))
	if rep.IOUring != nil && rep.IOUring.Available {
		fmt.Fprintln(w, "\nio_uring features:")
		for _, x := range rep.IOUring.List {
			yn := yesNo(x.Supported)
			if x.Unknown {
				yn = "?  " // the probe could not ask the kernel
			}
			fmt.Fprintf(w, "  %s  %-36s >= %-5s %s\n", yn, x.Name, x.MinKernel, x.Reason)
		}
	}
	fmt.Fprintln(w, "\ninterfaces (do sockets get NAPI ids?):")
	for _, d := range rep.Interfaces {
		fmt.Fprintf(w, "  %s  %-16s %s\n", yesNo(d.SocketsGetNAPIIDs), d.Name, d.Reason)
	}
	if len(rep.Warnings) > 0 {
		fmt.Fprintln(w, "\nwarnings:")
		for _, s := range rep.Warnings {
			fmt.Fprintln(w, "  -", s)
		}
	}
	for _, s := range rep.Errors {
		fmt.Fprintln(w, "error:", s)
	}
}

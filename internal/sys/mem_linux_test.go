package sys

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/hugetlb"
)

func TestMapAnon(t *testing.T) {
	page := os.Getpagesize()
	tests := []struct {
		name    string
		length  int
		huge    bool
		wantCap int
	}{
		{"one byte", 1, false, page},
		{"page plus one", page + 1, false, 2 * page},
		{"huge 3MiB", 3 << 20, true, 4 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, kind, err := MapAnon(tt.length, tt.huge)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != tt.length || cap(b) != tt.wantCap {
				t.Errorf("len, cap = %d, %d; want %d, %d", len(b), cap(b), tt.length, tt.wantCap)
			}
			// The kind is checked against the mapping the process got:
			// whether a hugetlb page was there for it depends on what
			// other processes took from the pool meanwhile, which the
			// pool's counters read beforehand cannot say.
			// TestMapAnonHugeTLB checks that free pages are used.
			if got := mappedKind(t, b); kind != got {
				t.Errorf("kind = %v, the mapping is on %v pages", kind, got)
			}
			switch {
			case !tt.huge && kind != PageSmall:
				t.Errorf("kind = %v without huge, want %v", kind, PageSmall)
			case tt.huge && kind == PageSmall && thpAvailable():
				t.Errorf("kind = %v with transparent huge pages available", kind)
			}
			align := uintptr(page)
			if tt.huge {
				align = uintptr(HugePageSize())
			}
			if addr := uintptr(unsafe.Pointer(&b[0])); addr%align != 0 {
				t.Errorf("address %#x not aligned to %#x", addr, align)
			}
			for i := range b {
				if b[i] != 0 {
					t.Fatalf("byte %d = %d, want zeroed memory", i, b[i])
				}
				b[i] = byte(i)
			}
			for i := range b {
				if b[i] != byte(i) {
					t.Fatalf("byte %d = %d after write", i, b[i])
				}
			}
			if err := Unmap(b); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMapAnonErrors(t *testing.T) {
	for _, n := range []int{0, -1} {
		if _, _, err := MapAnon(n, false); !errors.Is(err, unix.EINVAL) {
			t.Errorf("MapAnon(%d) error = %v, want EINVAL", n, err)
		}
	}
	b, _, err := MapAnon(2*os.Getpagesize(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	// A slice that does not start at the mapping is refused by munmap
	// (unaligned address), not silently accepted.
	if err := Unmap(b[1:]); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Unmap(b[1:]) error = %v, want EINVAL", err)
	}
}

// TestMbindReslices binds slices that do not start on a page, and a hugetlb
// mapping whose length is not a multiple of its page (found in review: both
// failed with EINVAL, and the engine, which binds as best effort, silently
// left its buffers where they were).
func TestMbindReslices(t *testing.T) {
	b, _, err := MapAnon(8192, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	if err := Mbind(b[100:], 0); err != nil {
		t.Errorf("Mbind(b[100:]): %v", err)
	}
	h := mapHugeTLB(t, 3000, 1)
	defer Unmap(h)
	for _, s := range [][]byte{h, h[100:]} {
		if err := Mbind(s, 0); err != nil {
			t.Errorf("Mbind of a hugetlb slice of %d bytes: %v", len(s), err)
		}
	}
}

// TestMapAnonHugeTLB grows the hugetlb pool by two pages, checks that a huge
// mapping comes from it, and restores vm.nr_hugepages.
func TestMapAnonHugeTLB(t *testing.T) {
	b := mapHugeTLB(t, HugePageSize()+1, 2)
	defer func() {
		if err := Unmap(b); err != nil {
			t.Error(err)
		}
	}()
	if cap(b) != 2*HugePageSize() {
		t.Errorf("cap = %d, want %d", cap(b), 2*HugePageSize())
	}
	b[0], b[len(b)-1] = 1, 2
	if got := smaps(t, b)["Private_Hugetlb"]; got != fmt.Sprintf("%d kB", cap(b)>>10) {
		t.Errorf("Private_Hugetlb = %q after touching both huge pages, want %d kB", got, cap(b)>>10)
	}
}

// mapHugeTLB returns MapAnon(length, true) from a hugetlb pool grown by n
// pages for the test, which must be enough for it. MapAnon must take them
// where they are free; Take runs it again where another process took them
// first.
func mapHugeTLB(t *testing.T, length, n int) []byte {
	t.Helper()
	var b []byte
	hugetlb.Grow(t, HugePageSize(), n).Take(func() bool {
		var kind PageKind
		var err error
		b, kind, err = MapAnon(length, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := mappedKind(t, b); kind != PageHuge || got != PageHuge {
			t.Logf("MapAnon(%d, true) with %d hugetlb pages free: %v, the mapping on %v pages", length, n, kind, got)
			if err := Unmap(b); err != nil {
				t.Fatal(err)
			}
			return false
		}
		return true
	})
	return b
}

// smaps returns the fields /proc/self/smaps has for the mapping that holds
// b's first byte: the kernel merges an anonymous mapping with a neighbour
// of the same flags, so b need not start one.
func smaps(t *testing.T, b []byte) map[string]string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	var fields map[string]string
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(line, " ")
		if name, ok := strings.CutSuffix(k, ":"); ok {
			if fields != nil {
				fields[name] = strings.TrimSpace(v)
			}
			continue
		}
		// A mapping's first line: "start-end perms offset dev inode path".
		if fields != nil {
			break
		}
		lo, hi, _ := strings.Cut(k, "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && start <= addr && addr < end {
			fields = map[string]string{}
		}
	}
	if fields == nil {
		t.Fatalf("no mapping holds %#x in /proc/self/smaps", addr)
	}
	return fields
}

// mappedKind is the kind of pages b's mapping is on, as the kernel says in
// /proc/self/smaps: "ht" in VmFlags for hugetlb, "hg" for MADV_HUGEPAGE.
func mappedKind(t *testing.T, b []byte) PageKind {
	t.Helper()
	f := smaps(t, b)
	flags := strings.Fields(f["VmFlags"])
	switch {
	case slices.Contains(flags, "ht"):
		if want := fmt.Sprintf("%d kB", HugePageSize()>>10); f["KernelPageSize"] != want {
			t.Errorf("hugetlb mapping with KernelPageSize %q, want %s", f["KernelPageSize"], want)
		}
		return PageHuge
	case slices.Contains(flags, "hg"):
		return PageTHP
	}
	return PageSmall
}

func TestMbind(t *testing.T) {
	tests := []struct {
		name     string
		mode     MemPolicy
		node     int
		wantErr  error
		wantMode MemPolicy
		wantNode int
	}{
		{"preferred node 0", MPolPreferred, 0, nil, MPolPreferred, 0},
		{"bind node 0", MPolBind, 0, nil, MPolBind, 0},
		{"default", MPolDefault, 0, nil, MPolDefault, -1},
		{"offline node", MPolPreferred, maxNodes - 1, unix.EINVAL, 0, 0},
		{"negative node", MPolPreferred, -1, unix.EINVAL, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _, err := MapAnon(64<<10, false)
			if err != nil {
				t.Fatal(err)
			}
			defer Unmap(b)
			err = MbindPolicy(b, tt.mode, tt.node)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b[0] = 1
			mode, node, err := MempolicyOf(b)
			if err != nil {
				t.Fatal(err)
			}
			if mode != tt.wantMode || node != tt.wantNode {
				t.Errorf("policy = %d node %d, want %d node %d", mode, node, tt.wantMode, tt.wantNode)
			}
		})
	}
	b, _, err := MapAnon(4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	if err := Mbind(b, 0); err != nil {
		t.Fatalf("Mbind(node 0): %v", err)
	}
}

func TestSetMempolicy(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread() // the thread's policy is restored below
	if err := SetMempolicy(MPolPreferred, 0); err != nil {
		t.Fatal(err)
	}
	// get_mempolicy without MPOL_F_ADDR reports the calling thread's policy.
	var mode int32
	var mask nodeMask
	_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&mode)),
		uintptr(unsafe.Pointer(&mask)), maxNodes+1, 0, 0, 0)
	if err := SetMempolicy(MPolDefault, 0); err != nil {
		t.Fatalf("restore thread policy: %v", err)
	}
	if e != 0 {
		t.Fatal(e)
	}
	if MemPolicy(mode) != MPolPreferred || mask[0] != 1 {
		t.Errorf("thread policy = %d mask %#x, want preferred mask 0x1", mode, mask[0])
	}
	if err := SetMempolicy(MPolBind, maxNodes-1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("SetMempolicy(offline node) = %v, want EINVAL", err)
	}
}

func TestPageKindString(t *testing.T) {
	for k, want := range map[PageKind]string{PageSmall: "4k", PageTHP: "thp", PageHuge: "hugetlb", 7: "PageKind(?)"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(k), got, want)
		}
	}
}

// TestTHPPerSizeSwitch turns HugePageSize transparent huge pages off with their
// own switch (6.8+), the top-level one left as it is, and checks that
// MapAnon no longer reports THP: it read the top-level switch only (found
// in review). The switch is put back.
func TestTHPPerSizeSwitch(t *testing.T) {
	old, err := os.ReadFile(thpSizeEnabledPath())
	if err != nil {
		t.Skipf("no per-size THP switch (before 6.8, or no THP): %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to set the THP switch")
	}
	was := "inherit"
	for _, f := range strings.Fields(string(old)) {
		if strings.HasPrefix(f, "[") {
			was = strings.Trim(f, "[]")
		}
	}
	if err := os.WriteFile(thpSizeEnabledPath(), []byte("never"), 0); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.WriteFile(thpSizeEnabledPath(), []byte(was), 0); err != nil {
			t.Errorf("restoring %s to %s: %v", thpSizeEnabledPath(), was, err)
		}
	}()
	b, kind, err := MapAnon(HugePageSize(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	if kind == PageTHP {
		t.Errorf("MapAnon reports %v with %d kB THP off", kind, HugePageSize()>>10)
	}
}

// TestTHPDisabledByPrctl maps huge memory in a process that
// prctl(PR_SET_THP_DISABLE) has denied transparent huge pages (inherited
// across fork and execve): madvise(MADV_HUGEPAGE) still succeeds, but the
// kernel backs nothing with huge pages, and MapAnon reported PageTHP, what
// BufferPages said. The process's setting is put back.
func TestTHPDisabledByPrctl(t *testing.T) {
	if !thpAvailable() {
		t.Skip("transparent huge pages are off on this host: no THP to deny")
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
	b, kind, err := MapAnon(HugePageSize(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	if kind == PageTHP {
		t.Errorf("MapAnon reports %v in a process denied THP", kind)
	}
}

// TestMmapAlignedTrimFails makes mmapAligned's trim fail for real and
// checks that the failed call leaves nothing mapped (found in review: it
// returned the error and kept its mapping). A new mapping lands just below
// the lowest one and merges with it when their flags match, as
// mmapAligned's own mappings do with each other: trimming the end of one
// merged so cuts a mapping in two, which munmap refuses (ENOMEM) while the
// process has vm.max_map_count mappings. The test gets there by splitting a
// PROT_NONE reservation with mprotect, calls mmapAligned until a call
// fails, keeping the mappings of those that did not (each the neighbour of
// the next), and gives everything back right after.
func TestMmapAlignedTrimFails(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		t.Skipf("vm.max_map_count unknown: %v", err)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if limit > 1<<20 {
		t.Skipf("vm.max_map_count is %d: too many mappings to reach in a test", limit)
	}
	page := uintptr(os.Getpagesize())
	const size, align = 8 << 20, 2 << 20
	status := make([]byte, 16<<10)
	// Stop the GC meanwhile: the runtime must need no new mapping while
	// the process is at its limit, and nothing below allocates.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	resLen := uintptr(2*limit) * page
	res, err := unix.MmapPtr(-1, 0, nil, resLen, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		t.Fatal(err)
	}
	// Each page from the start made readable, or read-write, alternately:
	// one more mapping each (a page parted from the reservation, unlike
	// its neighbour), until refused: the process is then at the limit.
	prot := func(k uintptr) int { return unix.PROT_READ | int(k%2)*unix.PROT_WRITE }
	pageAt := func(k uintptr) []byte { return unsafe.Slice((*byte)(unsafe.Add(res, k*page)), page) }
	k := uintptr(0)
	for k < resLen/page && unix.Mprotect(pageAt(k), prot(k)) == nil {
		k++
	}
	var kept [8]unsafe.Pointer
	n, before, after := 0, 0, 0
	for ; n < len(kept); n++ {
		before = vmSizeKB(status)
		kept[n], err = mmapAligned(size, align)
		after = vmSizeKB(status)
		if err != nil {
			break
		}
		// One mapping more: give the last page back to the reservation
		// (one fewer), to be at the limit again.
		k--
		unix.Mprotect(pageAt(k), unix.PROT_NONE)
	}
	unix.MunmapPtr(res, resLen)
	for _, p := range kept[:min(n, len(kept))] {
		unix.MunmapPtr(p, size)
	}
	if err == nil {
		t.Skipf("none of %d mappings at the limit merged with a neighbour: no trim failed", n)
	}
	t.Logf("call %d at the mapping limit: %v; VmSize %d kB before, %d kB after", n+1, err, before, after)
	if se := (*os.SyscallError)(nil); !errors.As(err, &se) || se.Syscall != "munmap" || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("mmapAligned: %v, want a trim's munmap to fail with ENOMEM", err)
	}
	if before <= 0 || after < before || after-before >= size>>10 {
		t.Errorf("the failed call left %d kB mapped (VmSize %d kB before, %d kB after)", after-before, before, after)
	}
}

// vmSizeKB returns VmSize from /proc/self/status, read into buf without
// allocating, or -1.
func vmSizeKB(buf []byte) int {
	fd, err := unix.Open("/proc/self/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return -1
	}
	b := buf[:n]
	i := bytes.Index(b, []byte("\nVmSize:"))
	if i < 0 {
		return -1
	}
	kb, seen := 0, false
	for _, c := range b[i+len("\nVmSize:"):] {
		switch {
		case c >= '0' && c <= '9':
			kb, seen = kb*10+int(c-'0'), true
		case seen:
			return kb
		}
	}
	return -1
}

// TestHugetlbFlags checks the page size MAP_HUGETLB asks for: the kernel's
// MAP_HUGE_2MB and MAP_HUGE_1GB, and 512 MiB (29 << MAP_HUGE_SHIFT) for
// arm64 with 64 KiB pages.
func TestHugetlbFlags(t *testing.T) {
	for size, want := range map[int]int{
		2 << 20:   unix.MAP_HUGETLB | unix.MAP_HUGE_2MB,
		1 << 30:   unix.MAP_HUGETLB | unix.MAP_HUGE_1GB,
		512 << 20: unix.MAP_HUGETLB | 29<<unix.MAP_HUGE_SHIFT,
	} {
		if got := hugetlbFlags(size); got != want {
			t.Errorf("hugetlbFlags(%d) = %#x, want %#x", size, got, want)
		}
	}
}

// hugetlbCgroupEnv marks the child of TestMapAnonHugeTLBPastCgroupLimit.
const hugetlbCgroupEnv = "SPINDLE_TEST_HUGETLB_CGROUP"

// TestMapAnonHugeTLBPastCgroupLimit maps huge memory in a child process in
// a cgroup whose hugetlb limit (hugetlb.<size>.max, which Kubernetes sets
// for every pod: 0 unless it asks for huge pages) is 0, while the host's
// pool has a free page. The mmap succeeds there, the pages being reserved
// from the pool, but the cgroup is charged at the fault, and past its
// limit the fault is a SIGBUS: MapAnon returned PageHuge and the child
// died at its first write. MapAnon must see the shortage at the mapping
// and fall back to other pages that can be written.
func TestMapAnonHugeTLBPastCgroupLimit(t *testing.T) {
	if os.Getenv(hugetlbCgroupEnv) != "" {
		b, kind, err := MapAnon(HugePageSize(), true)
		if err != nil {
			t.Fatal(err)
		}
		defer Unmap(b)
		if kind == PageHuge {
			t.Errorf("MapAnon in a cgroup with no hugetlb allowance: %v", kind)
		}
		b[0], b[len(b)-1] = 1, 2
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("a cgroup v2 cgroup of the test's own with hugetlb.*.max 0, and a huge page added to the pool, need root")
	}
	root := cgroup2Root(t)
	ctl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(string(ctl)), "hugetlb") {
		t.Skipf("no hugetlb controller in the cgroup2 hierarchy at %s (kernel without CONFIG_CGROUP_HUGETLB, or bound to cgroup v1): %q", root, ctl)
	}
	pool := hugetlb.Grow(t, HugePageSize(), 1)
	subtree := filepath.Join(root, "cgroup.subtree_control")
	on, err := os.ReadFile(subtree)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(string(on)), "hugetlb") {
		if err := os.WriteFile(subtree, []byte("+hugetlb"), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(subtree, []byte("-hugetlb"), 0); err != nil {
				t.Errorf("restoring %s: %v", subtree, err)
			}
		})
	}
	dir := filepath.Join(root, fmt.Sprintf("spindle-sys-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The child has exited: the cgroup is empty.
		if err := os.Remove(dir); err != nil {
			t.Errorf("cgroup %s left behind: %v", dir, err)
		}
	})
	limit := filepath.Join(dir, "hugetlb."+hugetlbCgroupSize(HugePageSize())+".max")
	if err := os.WriteFile(limit, []byte("0"), 0); err != nil {
		t.Fatal(err)
	}
	cg, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	// The child's fault past the limit counts as a "max" event. Without
	// one the child never got the pool's page (another process took it)
	// and passed without meeting the limit: it runs again.
	events := filepath.Join(dir, "hugetlb."+hugetlbCgroupSize(HugePageSize())+".events")
	pool.Take(func() bool {
		before := cgroupEvent(t, events, "max")
		cmd := exec.Command(os.Args[0], "-test.run=^TestMapAnonHugeTLBPastCgroupLimit$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), hugetlbCgroupEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestMapAnonHugeTLBPastCgroupLimit")) {
			t.Fatalf("child in a cgroup with %s 0: %v\n%s", filepath.Base(limit), err, firstLines(out, 12))
		}
		return cgroupEvent(t, events, "max") > before
	})
}

// cgroupEvent returns the count of the event named key in the cgroup
// events file path ("key count" lines).
func cgroupEvent(t *testing.T, path, key string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && k == key {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in %s: %q", key, path, b)
	return 0
}

// cgroup2Root returns where the cgroup2 hierarchy is mounted (/sys/fs/cgroup,
// or /sys/fs/cgroup/unified on a hybrid host), skipping the test without one.
func cgroup2Root(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 2 && f[2] == "cgroup2" {
			return f[1]
		}
	}
	t.Skip("no cgroup2 hierarchy mounted")
	return ""
}

// hugetlbCgroupSize names pages of size bytes as the hugetlb controller's
// files do: "2MB", "1GB", "64KB".
func hugetlbCgroupSize(size int) string {
	switch {
	case size >= 1<<30:
		return strconv.Itoa(size>>30) + "GB"
	case size >= 1<<20:
		return strconv.Itoa(size>>20) + "MB"
	}
	return strconv.Itoa(size>>10) + "KB"
}

// firstLines is b's first n lines: a child's crash report goes on for
// every goroutine.
func firstLines(b []byte, n int) []byte {
	i := 0
	for ; n > 0 && i < len(b); n-- {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return b
		}
		i += j + 1
	}
	return b[:i]
}

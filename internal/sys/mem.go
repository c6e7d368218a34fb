package sys

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// PageKind says which kind of pages back a mapping made by MapAnon.
type PageKind int

const (
	// PageSmall is ordinary base pages (4 KiB on amd64 and most arm64).
	PageSmall PageKind = iota
	// PageTHP is base pages with MADV_HUGEPAGE advice: the kernel backs the
	// HugePageSize-aligned parts with transparent huge pages when it can.
	PageTHP
	// PageHuge is explicit huge pages from the hugetlb pool (MAP_HUGETLB).
	PageHuge
)

// HugePageSize returns the huge page size MapAnon rounds huge requests to,
// read from the host once: the PMD-level size, the one transparent huge
// pages use and hugetlb has a pool of (2 MiB on amd64 and on arm64 with
// 4 KiB pages, 32 MiB with 16 KiB pages, 512 MiB with 64 KiB pages), from
// /sys/kernel/mm/transparent_hugepage/hpage_pmd_size; without THP, the
// default hugetlb size (Hugepagesize in /proc/meminfo); without either, 2
// MiB. Not the default hugetlb size first: a host booted with
// default_hugepagesz=1G would have every huge request rounded to 1 GiB.
// Any goroutine.
func HugePageSize() int { return hugePageSize() }

var hugePageSize = sync.OnceValue(func() int { return HugePageSizeAt("/") })

// HugePageSizeAt is HugePageSize read from the host files under root ("/"
// for the running host, or a captured tree), each time it is called: topo
// reports the hugetlb pool of this size, the one MapAnon draws from. Any
// goroutine.
func HugePageSizeAt(root string) int {
	valid := func(n uint64) bool {
		return n >= uint64(os.Getpagesize()) && n <= 1<<40 && n&(n-1) == 0
	}
	if b, err := os.ReadFile(filepath.Join(root, "sys/kernel/mm/transparent_hugepage/hpage_pmd_size")); err == nil {
		if n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64); err == nil && valid(n) {
			return int(n)
		}
	}
	if f, err := os.Open(filepath.Join(root, "proc/meminfo")); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			v, ok := bytes.CutPrefix(s.Bytes(), []byte("Hugepagesize:"))
			if !ok {
				continue
			}
			kb, ok := bytes.CutSuffix(bytes.TrimSpace(v), []byte(" kB"))
			if n, err := strconv.ParseUint(string(bytes.TrimSpace(kb)), 10, 64); ok && err == nil && valid(n<<10) {
				return int(n << 10)
			}
			break
		}
	}
	return 2 << 20
}

// String returns "4k", "thp" or "hugetlb".
//
// Any goroutine.
func (k PageKind) String() string {
	switch k {
	case PageSmall:
		return "4k"
	case PageTHP:
		return "thp"
	case PageHuge:
		return "hugetlb"
	}
	return "PageKind(?)"
}

// MemPolicy is a NUMA memory policy mode for Mbind and SetMempolicy
// (include/uapi/linux/mempolicy.h).
type MemPolicy int

const (
	// MPolDefault is MPOL_DEFAULT: allocate on the local node of the
	// faulting thread.
	MPolDefault MemPolicy = 0
	// MPolPreferred is MPOL_PREFERRED: prefer the node, fall back to others.
	MPolPreferred MemPolicy = 1
	// MPolBind is MPOL_BIND: only the node; allocation fails past it.
	MPolBind MemPolicy = 2
)

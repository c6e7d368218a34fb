package sys

// PageKind says which kind of pages back a mapping made by MapAnon.
type PageKind int

const (
	// PageSmall is ordinary base pages (4 KiB on amd64 and most arm64).
	PageSmall PageKind = iota
	// PageTHP is base pages with MADV_HUGEPAGE advice: the kernel backs the
	// 2 MiB-aligned parts with transparent huge pages when it can.
	PageTHP
	// PageHuge is explicit huge pages from the hugetlb pool (MAP_HUGETLB).
	PageHuge
)

// HugePageSize is the huge page size MapAnon rounds huge requests to: the
// default hugetlb and PMD-level THP size on amd64 and arm64 with 4 KiB pages.
const HugePageSize = 2 << 20

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

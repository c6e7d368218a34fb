// Package hugetlb is a test helper shared by spindle's test suites: it grows
// the kernel's hugetlb page pool for one test and restores it afterwards. It
// is imported by tests only.
package hugetlb

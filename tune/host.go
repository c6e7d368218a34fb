package tune

import (
	"path/filepath"

	"github.com/spindlenet/spindle/topo"
)

// IsLive reports whether root names the live host's / ("" counts as /)
// rather than a captured tree.
func IsLive(root string) bool { return root == "" || filepath.Clean(root) == "/" }

// ReadHost reads the live host when root is "/" (netlink included, in the
// calling thread's network namespace), else a captured tree under root
// with its netlink.json when present.
func ReadHost(root string) (*topo.Host, error) {
	if IsLive(root) {
		return topo.ReadLive()
	}
	return topo.ReadFixture(root)
}

// OpenTarget returns the Target for root. A captured tree's root is made
// absolute, since Apply saves it for Revert, which may run from another
// working directory. For the live host ("/") it dials netlink for
// coalescing writes; if that fails the Target has no netlink and such
// writes fail with a clear error. Call close when done.
func OpenTarget(root string) (t Target, close func(), err error) {
	if !IsLive(root) {
		abs, err := filepath.Abs(root)
		if err != nil {
			return Target{}, nil, err
		}
		return Target{Root: abs}, func() {}, nil
	}
	t = Target{Root: "/"}
	nc, err := topo.DialNetlink()
	if err != nil {
		return t, func() {}, nil
	}
	t.Netlink = nc
	return t, func() { nc.Close() }, nil
}

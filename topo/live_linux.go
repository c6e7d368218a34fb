//go:build linux

package topo

// ReadLive discovers the running host: root "/" plus netlink. Netlink
// being unavailable is reported in Host.Netlink, not returned as an error.
// It opens and closes a netlink socket in the calling thread's network
// namespace.
func ReadLive() (*Host, error) {
	return ReadRootWithNetlink("/")
}

// ReadRootWithNetlink reads /proc and /sys under root and asks netlink (in
// the calling thread's network namespace) for the netlink part.
func ReadRootWithNetlink(root string) (*Host, error) {
	nc, err := DialNetlink()
	if err != nil {
		h, rerr := Read(root, nil)
		if rerr != nil {
			return nil, rerr
		}
		h.Netlink = NetlinkStatus{Netdev: err.Error(), Ethtool: err.Error()}
		return h, nil
	}
	defer nc.Close()
	return Read(root, &Config{Netlink: nc, NetlinkStatus: nc.Status()})
}

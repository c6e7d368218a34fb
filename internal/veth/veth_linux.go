package veth

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// Requirements reports why New cannot work here: ErrNotRoot, or a
// *ToolError naming the missing tool. It returns nil if New can work.
func Requirements() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	for _, tool := range [][2]string{{"ip", "iproute2"}, {"ethtool", "ethtool"}} {
		if _, err := exec.LookPath(tool[0]); err != nil {
			return &ToolError{Tool: tool[0], Package: tool[1], Err: err}
		}
	}
	return nil
}

func run(argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// New creates the namespaces and the veth pair named by Names(cfg), with the
// addresses set, GRO on and TSO off on both ends, and both ends and both
// loopbacks up. On error it removes whatever it created, and nothing else
// (a namespace name already taken, by a Pair of the same Tag in this
// process for instance, is an error). The caller must
// Close the Pair. Any goroutine.
func New(cfg Config) (*Pair, error) {
	if cfg.Tag == "" {
		return nil, errors.New("veth: empty tag")
	}
	if err := Requirements(); err != nil {
		return nil, err
	}
	p := Names(cfg)
	for _, a := range []string{p.AddrA, p.AddrB} {
		if _, err := netip.ParsePrefix(a); err != nil {
			return nil, fmt.Errorf("veth: address: %w", err)
		}
	}
	// On error, delete the namespaces this call created (which takes the
	// veth pair with them), and only those: a name already taken belongs
	// to someone else, such as a Pair of the same Tag in this process.
	var created []string
	ok := false
	defer func() {
		if !ok {
			for _, ns := range created {
				run("ip", "netns", "del", ns)
			}
		}
	}()
	for _, ns := range []string{p.NSA, p.NSB} {
		if err := run("ip", "netns", "add", ns); err != nil {
			return nil, fmt.Errorf("veth: %w", err)
		}
		created = append(created, ns)
	}
	steps := [][]string{
		{"ip", "link", "add", p.DevA, "netns", p.NSA, "type", "veth", "peer", "name", p.DevB, "netns", p.NSB},
	}
	for _, end := range [][3]string{{p.NSA, p.DevA, p.AddrA}, {p.NSB, p.DevB, p.AddrB}} {
		ns, dev, addr := end[0], end[1], end[2]
		steps = append(steps,
			[]string{"ip", "-n", ns, "addr", "add", addr, "dev", dev},
			[]string{"ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on", "tso", "off"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", ns, "link", "set", dev, "up"},
		)
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			return nil, fmt.Errorf("veth: %w", err)
		}
	}
	ok = true
	return &p, nil
}

// Close deletes both namespaces, which destroys the veth pair with them,
// and a veth end left in the caller's namespace, if any. It is idempotent.
// Any goroutine.
func (p *Pair) Close() error {
	var errs []error
	for _, ns := range []string{p.NSA, p.NSB} {
		if _, err := os.Stat(Path(ns)); err != nil {
			continue
		}
		if err := run("ip", "netns", "del", ns); err != nil && !gone(Path(ns)) {
			errs = append(errs, err)
		}
	}
	for _, dev := range []string{p.DevA, p.DevB} {
		sys := filepath.Join("/sys/class/net", dev)
		if _, err := os.Stat(sys); err == nil {
			if err := run("ip", "link", "del", dev); err != nil && !gone(sys) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("veth: %w", err)
	}
	return nil
}

// gone reports whether path no longer exists: what a failed deletion
// wanted, when a concurrent Close did it first.
func gone(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist)
}

// InNetNS runs fn on a goroutine locked to an OS thread that has joined
// the network namespace at nsPath (e.g. Path(p.NSA)). Everything fn does on
// its own goroutine (sockets, /proc/sys/net files, netlink, mounting
// sysfs) happens in that namespace; fn must not hand such work to other
// goroutines. Afterwards the thread is not unlocked: it exits with the
// goroutine (STYLE.md rule 5), so that nothing fn changed on it (its
// network namespace, a mount namespace it unshared, its CPU affinity)
// reaches another goroutine; it is never the main thread, which the
// runtime would keep. If fn ends its goroutine without returning
// (runtime.Goexit, as t.FailNow does), InNetNS returns an error. Any
// goroutine.
func InNetNS(nsPath string, fn func() error) error {
	errc := make(chan error, 1)
	go sys.LockedThread(func() {
		target, err := os.Open(nsPath)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- os.NewSyscallError("setns", err)
			return
		}
		returned := false
		defer func() {
			if !returned {
				// fn called runtime.Goexit (t.FailNow, t.SkipNow) or
				// panicked.
				errc <- errors.New("veth: InNetNS: fn ended its goroutine without returning")
			}
		}()
		err = fn()
		returned = true
		errc <- err
	})
	return <-errc
}

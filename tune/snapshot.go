package tune

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spindlenet/spindle/topo"
)

// Snapshot is one reading of the counters diagnosis compares.
type Snapshot struct {
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// Interrupts is /proc/interrupts.
	Interrupts *topo.Interrupts `json:"interrupts"`
	// Softirqs is /proc/softirqs.
	Softirqs *topo.Softirqs `json:"softirqs"`
	// Stat is the per-CPU time from /proc/stat.
	Stat map[int]topo.CPUTime `json:"stat"`
	// Softnet is /proc/net/softnet_stat.
	Softnet []topo.Softnet `json:"softnet"`
	// IRQAffinity is smp_affinity_list of each NIC queue IRQ.
	IRQAffinity map[int]string `json:"irq_affinity"`
	// NICStats holds, per interface, the drop counters from
	// /sys/class/net/<if>/statistics.
	NICStats map[string]map[string]uint64 `json:"nic_stats"`
	// QStats holds, per interface, the per-queue counters from netlink
	// qstats-get, when a QStatsSource was given and the driver has them.
	QStats map[string][]topo.QueueStats `json:"qstats,omitempty"`
}

// QStatsSource returns per-queue counters of an interface.
// *topo.NetlinkClient implements it.
type QStatsSource interface {
	QStats(ifindex int) ([]topo.QueueStats, error)
}

// nicStatNames are the statistics files read per interface.
var nicStatNames = []string{"rx_packets", "rx_dropped", "rx_missed_errors", "rx_fifo_errors"}

// TakeSnapshot reads the counters under root for the NICs of h, and the
// per-queue counters from qs when it is not nil.
func TakeSnapshot(root string, h *topo.Host, qs QStatsSource) (*Snapshot, error) {
	read := func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(root, p)) }
	// A file that does not parse is named as read, under root: with
	// --root DIR, a damaged capture's file, not the live host's.
	named := func(p string, err error) error { return fmt.Errorf("%s: %w", filepath.Join(root, p), err) }
	s := &Snapshot{Time: time.Now(), IRQAffinity: map[int]string{}, NICStats: map[string]map[string]uint64{}}
	// A CPU hotplugged during the read leaves /proc/interrupts with lines
	// that do not match its header: ReadInterrupts reads it again.
	var err error
	if s.Interrupts, err = topo.ReadInterrupts(filepath.Join(root, "/proc/interrupts")); err != nil {
		return nil, err
	}
	b, err := read("/proc/softirqs")
	if err != nil {
		return nil, err
	}
	if s.Softirqs, err = topo.ParseSoftirqs(b); err != nil {
		return nil, named("/proc/softirqs", err)
	}
	if b, err = read("/proc/stat"); err != nil {
		return nil, err
	}
	st, err := topo.ParseStat(b)
	if err != nil {
		return nil, named("/proc/stat", err)
	}
	s.Stat = st.CPU
	if b, err = read("/proc/net/softnet_stat"); err != nil {
		return nil, err
	}
	// Before Linux 5.10 softnet_stat has one line per online CPU and no
	// CPU column: number the lines by the CPUs online now.
	online := h.Online
	if ob, err := read("/sys/devices/system/cpu/online"); err == nil {
		if set, err := topo.ParseCPUList(string(ob)); err == nil && set.Len() > 0 {
			online = set
		}
	}
	if s.Softnet, err = topo.ParseSoftnetOnline(b, online); err != nil {
		return nil, named("/proc/net/softnet_stat", err)
	}
	for _, n := range h.NICs {
		for _, q := range n.IRQs {
			if b, err := read(fmt.Sprintf("/proc/irq/%d/smp_affinity_list", q.IRQ)); err == nil {
				s.IRQAffinity[q.IRQ] = strings.TrimSpace(string(b))
			}
		}
		st := map[string]uint64{}
		for _, name := range nicStatNames {
			b, err := read("/sys/class/net/" + n.Name + "/statistics/" + name)
			if err != nil {
				continue
			}
			if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
				st[name] = v
			}
		}
		s.NICStats[n.Name] = st
		if qs != nil && !n.Virtual && n.Ifindex > 0 {
			if q, err := qs.QStats(n.Ifindex); err == nil && len(q) > 0 {
				if s.QStats == nil {
					s.QStats = map[string][]topo.QueueStats{}
				}
				s.QStats[n.Name] = q
			}
		}
	}
	return s, nil
}

// Sample takes a snapshot, waits period (or until ctx is done, which is an
// error), and takes another. qs may be nil.
func Sample(ctx context.Context, root string, h *topo.Host, period time.Duration, qs QStatsSource) (before, after *Snapshot, err error) {
	if before, err = TakeSnapshot(root, h, qs); err != nil {
		return nil, nil, err
	}
	t := time.NewTimer(period)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-t.C:
	}
	if after, err = TakeSnapshot(root, h, qs); err != nil {
		return nil, nil, err
	}
	return before, after, nil
}

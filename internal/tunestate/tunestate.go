// Package tunestate reads, from the state file `spindle tune plan --apply`
// writes (package tune owns the format), the one thing the engine needs:
// the CPUs the applied plan set aside for event loops. It exists so that
// the engine learns them without importing package tune and its netlink
// dependencies.
package tunestate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spindlenet/spindle/internal/cpulist"
)

// DefaultPath is where `spindle tune plan --apply` saves its state unless
// told otherwise (--state).
const DefaultPath = "/run/spindle/tune-state.json"

// version is the state format this package reads (tune.State.Version).
const version = 1

// ErrNotLive means the state file records a plan applied to a captured
// tree (`spindle tune apply --root DIR`), not to this host: its loop CPUs
// are the captured host's.
var ErrNotLive = errors.New("plan was applied to a captured tree, not to this host")

// ErrOtherBoot means the state file was saved in another boot (a --state
// on persistent storage, read after a reboot): the reboot undid what the
// plan wrote, and `spindle tune revert` refuses the file as stale.
var ErrOtherBoot = errors.New("plan was applied in another boot")

// bootIDPath is the kernel's id of this boot (tune.State.BootID).
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// BootID returns the boot id under root ("/": this host's), "" when it
// cannot be read (a captured tree without it). Any goroutine.
func BootID(root string) string {
	b, err := os.ReadFile(filepath.Join(root, bootIDPath))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// LoopCPUs returns the loop CPUs of the plan applied with state file path:
// nil and no error when there is no such file (nothing applied, or
// reverted: revert renames it). A plan applied under a root other than the
// live "/" (the state's "root"; absent or "" counts as "/") gives nil and an
// error wrapping ErrNotLive: its CPUs belong to the captured host, whose
// state may still sit at the default path. A state saved in another boot
// (its "boot_id" set and not this boot's) gives nil and an error wrapping
// ErrOtherBoot. Any goroutine.
func LoopCPUs(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st struct {
		Version int    `json:"version"`
		Root    string `json:"root"`
		BootID  string `json:"boot_id"`
		Plan    *struct {
			LoopCPUs string `json:"loop_cpus"`
		} `json:"plan"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.Version != version || st.Plan == nil {
		return nil, fmt.Errorf("%s: not a spindle tune state file of version %d", path, version)
	}
	if st.Root != "" && filepath.Clean(st.Root) != "/" {
		return nil, fmt.Errorf("%s: %w (root %s)", path, ErrNotLive, st.Root)
	}
	if now := BootID("/"); st.BootID != "" && now != "" && now != st.BootID {
		return nil, fmt.Errorf("%s: %w (boot id %s, now %s)", path, ErrOtherBoot, st.BootID, now)
	}
	cpus, err := cpulist.Parse(st.Plan.LoopCPUs)
	if err != nil {
		return nil, fmt.Errorf("%s: loop_cpus: %w", path, err)
	}
	return cpus, nil
}

// Package tune diagnoses a host's networking setup, makes reviewable
// tuning plans, applies them with saved state and reverts them.
//
// Diagnosis samples kernel counters twice (Sample) and hands the two
// snapshots and the topology to Diagnose, which is pure: every finding it
// reports carries the evidence (counter deltas, settings) and the fix.
//
// A Plan is data: each Write names a /proc or /sys file (or an ethtool
// netlink parameter), its current value, the new value and why. MakePlan
// builds one for a policy (Inline or Dedicated) from a topo.Host without
// touching the host. Apply re-checks every current value, saves them to a
// state file, then writes; a failed write rolls back what was done. Revert
// restores the saved values byte for byte and verifies them; targets that
// no longer exist are reported as gone and do not stop the rest.
package tune

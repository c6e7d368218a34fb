package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// peersModule is the module path of the nested module bench/peers.
const peersModule = "github.com/spindlenet/spindle/bench/peers"

// FindPeers looks for the bench/peers module source in dir and its
// parents, starting at the working directory when dir is "".
func FindPeers(dir string) (string, error) {
	if dir != "" {
		if isPeers(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%s is not the %s module", dir, peersModule)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		for _, cand := range []string{filepath.Join(d, "bench", "peers"), filepath.Join(d, "peers")} {
			if isPeers(cand) {
				return cand, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no bench/peers module source in %s or its parents (run from the spindle source tree, or pass --peers-dir)", wd)
		}
	}
}

func isPeers(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && bytes.Contains(b, []byte("module "+peersModule))
}

// BuildPeers builds the peers binary (gnet and other third-party arms) from
// the bench/peers module source into outDir with `go build`, and returns
// its path. It needs the source tree and a Go toolchain; the error says
// which is missing.
func BuildPeers(ctx context.Context, dir, outDir string) (string, error) {
	src, err := FindPeers(dir)
	if err != nil {
		return "", fmt.Errorf("cannot build the peers binary: %w", err)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		//lint:ignore SA1019 the toolchain this binary was built with, when PATH has none: a fallback that may be gone, checked below
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, serr := os.Stat(gobin); serr != nil {
			return "", fmt.Errorf("cannot build the peers binary: no go toolchain in PATH: %w", err)
		}
	}
	out := filepath.Join(outDir, "spindle-peers")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// go build's work directory goes under outDir, so that a build killed
	// on cancel (which cannot remove it) leaves none behind in /tmp.
	work, err := os.MkdirTemp(outDir, "gotmp-")
	if err != nil {
		return "", fmt.Errorf("cannot build the peers binary: %w", err)
	}
	defer os.RemoveAll(work)
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, ".")
	killGroupOnCancel(cmd)
	cmd.Dir = src
	// The nested module builds by its own go.mod, whose replace takes the
	// spindle packages from this source tree: a workspace (GOWORK, or a
	// go.work above the tree) that does not list bench/peers refuses to
	// build it, and one that does may pick other versions.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOTMPDIR="+work)
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cannot build the peers binary in %s: %w: %s", src, err, strings.TrimSpace(msg.String()))
	}
	if _, err := os.Stat(out); err != nil {
		return "", errors.New("cannot build the peers binary: go build made no binary")
	}
	return out, nil
}

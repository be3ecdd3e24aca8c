// Package buildinfo holds what `kubectl crdver version` prints, for both executables: the
// small kubectl-crdver, which answers `version` itself, and crdver-engine, which answers every
// command. It depends only on the standard library and client-go's version package (no
// initialiser; imported so that the client-go module is in every binary's build info).
//
// Version and Commit are stamped at build time, into both binaries:
//
//	go build -ldflags "-X github.com/crdver/kubectl-crdver/internal/buildinfo.Version=v0.1.0 -X github.com/crdver/kubectl-crdver/internal/buildinfo.Commit=$(git rev-parse HEAD)" ./cmd/...
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	// No initialiser. The front binary links nothing else of client-go; without this import
	// its build info would not list the module whose version `version` reports.
	_ "k8s.io/client-go/pkg/version"
)

// Version and Commit are stamped at build time (-ldflags -X, see the package doc).
var (
	Version = "dev"
	Commit  = ""
)

// Info is what `kubectl crdver version` prints.
type Info struct {
	Version           string `json:"version"`
	Commit            string `json:"commit,omitempty"`
	GoVersion         string `json:"goVersion"`
	Platform          string `json:"platform"`
	KubernetesLibrary string `json:"kubernetesLibraries"`
}

// Get returns this binary's Info; KubernetesLibrary is the k8s.io/client-go module's version
// in the binary's build info ("" when it has none, as in test binaries).
func Get() Info {
	bi := Info{Version: Version, Commit: Commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "k8s.io/client-go" {
				bi.KubernetesLibrary = d.Version
			}
		}
	}
	return bi
}

// PrintHuman prints bi on one line, for people.
func PrintHuman(w io.Writer, bi Info) error {
	commit := ""
	if bi.Commit != "" {
		commit = " commit " + bi.Commit
	}
	_, err := fmt.Fprintf(w, "kubectl-crdver %s%s (%s, %s, Kubernetes libraries %s)\n", bi.Version, commit, bi.GoVersion, bi.Platform, bi.KubernetesLibrary)
	return err
}

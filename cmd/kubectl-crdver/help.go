package main

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// helpAnswer returns how this binary answers a request for help by itself, or nil when the
// engine must: `kubectl crdver` alone, `kubectl crdver [COMMAND...] --help|-h` and
// `kubectl crdver help [COMMAND...]`, for the commands helpTexts holds (generated from the
// engine's own command tree by hack/docgen -front-help; a test keeps it current, another runs
// both executables on the same vectors). Anything else — a flag among the words, a command it
// does not know, Windows, where the engine's defaults come from other variables — goes to the
// engine.
func helpAnswer(argv []string) func(stdout io.Writer) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	args := argv[1:]
	var path []string
	switch {
	case len(args) == 0:
	case args[0] == "help":
		path = args[1:]
	case args[len(args)-1] == "--help" || args[len(args)-1] == "-h":
		path = args[:len(args)-1]
	default:
		return nil
	}
	for _, w := range path {
		if w == "" || strings.HasPrefix(w, "-") {
			return nil
		}
	}
	text, ok := helpTexts[strings.Join(path, " ")]
	if !ok {
		return nil
	}
	return func(w io.Writer) error {
		_, err := io.WriteString(w, fillHelp(text))
		return err
	}
}

// fillHelp puts into a help text what the engine's flags take from the machine: kubectl's
// --cache-dir default (cli-runtime: $KUBECACHEDIR, else $HOME/.kube/cache) and preview's
// --workers default (one per core the Go runtime uses).
func fillHelp(text string) string {
	cache := os.Getenv("KUBECACHEDIR")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), ".kube", "cache")
	}
	return strings.NewReplacer("{{cache-dir}}", cache, "{{workers}}", strconv.Itoa(runtime.GOMAXPROCS(0))).Replace(text)
}

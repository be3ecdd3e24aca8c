// Package initgc keeps Go's garbage collector off while the program's packages initialise,
// and lets a short command finish without a collection.
//
// kubectl-crdver links the API server's own validation, CEL and registry code; their package
// initialisers (schemes, metric registries, format tables) allocate about 6 MB before main
// runs, so the collector, whose first goal is 4 MB, would run a full cycle during
// initialisation: a third of the instructions of `versions --sort`, a quarter of those of
// `versions -f FILE --can-remove`, commands that scripts run in loops. Imported first by the
// command's main package and depending only on the standard library, this package is
// initialised before those packages (Go initialises packages in import-path order, each once
// its own imports are) and turns the collector off; main calls Resume before the command runs.
// A test of the built binary checks that no cycle runs during initialisation.
package initgc

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// percent is what GOGC asked for (100 when unset, -1 for GOGC=off), read while turning the
// collector off during this package's initialisation.
var percent = debug.SetGCPercent(-1)

var once sync.Once

// sink makes the sentinel of Resume a heap object.
var sink *[64]byte

// Resume lets the collector's first cycle wait until the memory the Go runtime holds has grown
// by headroom bytes beyond what it holds now (or reached GOMEMLIMIT, if that comes first); from
// that cycle on, the collector runs as GOGC and GOMEMLIMIT ask, as if initgc had never turned
// it off. A command whose input is small finishes before that cycle; one that reads more pays
// it once, at a heap headroom bytes larger than the runtime's usual first goal. Only the first
// call does anything.
func Resume(headroom uint64) {
	once.Do(func() {
		if percent < 0 { // GOGC=off: the collector stays off, as asked
			return
		}
		limit := debug.SetMemoryLimit(-1) // GOMEMLIMIT, or math.MaxInt64 when unset
		s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		first := int64(s[0].Value.Uint64() - s[1].Value.Uint64() + headroom)
		if first >= limit {
			debug.SetGCPercent(percent)
			return
		}
		// With GOGC off, the memory limit alone starts the first cycle. That cycle frees the
		// sentinel, whose cleanup puts GOGC and GOMEMLIMIT back.
		sink = new([64]byte)
		runtime.AddCleanup(sink, func(limit int64) {
			debug.SetGCPercent(percent)
			debug.SetMemoryLimit(limit)
		}, limit)
		sink = nil
		debug.SetMemoryLimit(first)
	})
}

// Default makes p (a percentage) and limit (bytes) the collector's settings when the user set neither
// GOGC nor GOMEMLIMIT: a larger GOGC spends memory to save collections, and the soft limit
// keeps that memory bounded (the collector runs more often as the heap nears it). Called
// before Resume, which then restores these instead of Go's defaults. With either variable
// set it does nothing: the user's settings are kept as asked.
func Default(p, limit int) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	percent = p
	debug.SetMemoryLimit(int64(limit))
}

// Percent is the percentage GOGC asked for (-1 for off), whatever the collector's state now.
func Percent() int { return percent }

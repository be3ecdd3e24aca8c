//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// execEngine replaces this process with the engine: same process, same arguments, standard
// streams and environment, so signals and the exit code are exactly the engine's.
func execEngine(engine string, argv []string) int {
	err := syscall.Exec(engine, argv, os.Environ())
	return report(os.Stderr, fmt.Errorf("running %s: %w", engine, err))
}

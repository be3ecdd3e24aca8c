//go:build !unix

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
)

// execEngine runs the engine as a child with the same arguments, standard streams and
// environment, and returns its exit code. An interrupt (Ctrl-C reaches the whole console, so
// the engine gets it too) is also passed on where the platform allows it; this process only
// waits for the engine to finish.
func execEngine(engine string, argv []string) int {
	cmd := exec.Command(engine, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	if err := cmd.Start(); err != nil {
		return report(os.Stderr, fmt.Errorf("running %s: %w", engine, err))
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-interrupts:
				_ = cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return report(os.Stderr, fmt.Errorf("running %s: %w", engine, err))
	}
	return cmd.ProcessState.ExitCode()
}

//go:build unix && !linux

package fleet

import "syscall"

// childAttr: the child has a process group of its own, so that the terminal's Ctrl-C reaches
// this process only, which passes one interrupt on (the engine stops at once on a second one).
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

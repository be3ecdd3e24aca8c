package fleet

import "syscall"

// childAttr: the child has a process group of its own, so that the terminal's Ctrl-C reaches
// this process only, which passes one interrupt on (the engine stops at once on a second one);
// and it is sent SIGTERM when this process dies (also by SIGKILL), so that it stops as on
// Ctrl-C instead of outliving the fleet run.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

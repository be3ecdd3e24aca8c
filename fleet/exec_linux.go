package fleet

import "syscall"

// childAttr: the child is sent SIGTERM when this process dies (also by SIGKILL), so that it
// stops as on Ctrl-C instead of outliving the fleet run.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} }

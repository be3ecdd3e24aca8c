package fleet

import "syscall"

// childAttr: the defaults (a child cannot be interrupted on Windows: ending its run kills it).
func childAttr() *syscall.SysProcAttr { return nil }

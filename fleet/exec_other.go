//go:build !linux

package fleet

import "syscall"

// childAttr: nothing beyond the defaults (a child stays in this process's group, so a signal to
// the group reaches it).
func childAttr() *syscall.SysProcAttr { return nil }

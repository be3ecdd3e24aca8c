package testenv

import "syscall"

var termSignal = syscall.SIGTERM

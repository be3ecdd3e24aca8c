package testenv

import "runtime"

// exeSuffix is ".exe" on Windows, where executables carry it.
func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}

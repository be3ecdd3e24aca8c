# Sourced by the hack/build-*.sh scripts (bash): shared helpers for their cached builds.

# lock_folder DIR: creates DIR and takes an exclusive lock on DIR/.lock for the rest of the
# script (file descriptor 9, released when the script exits). Several test runs (or
# developers' shells) may ask for the same binary at once: one builds, the others wait for it.
# Without flock(1) it does not lock.
lock_folder() {
  mkdir -p "$1"
  if command -v flock >/dev/null 2>&1; then
    exec 9>>"$1/.lock"
    flock 9
  fi
}

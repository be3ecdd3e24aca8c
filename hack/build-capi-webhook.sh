#!/usr/bin/env bash
# Kept for its callers: hack/build-webhook.sh capi (see there).
exec "$(dirname "${BASH_SOURCE[0]}")/build-webhook.sh" capi "$@"

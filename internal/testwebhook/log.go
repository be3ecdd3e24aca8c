package testwebhook

import (
	"io"
	"log"
)

// newQuietLogger drops the server's own log lines (TLS handshake errors from tests that
// connect with the wrong CA on purpose).
func newQuietLogger() *log.Logger { return log.New(io.Discard, "", 0) }

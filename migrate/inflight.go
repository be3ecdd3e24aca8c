package migrate

import (
	"context"
	"time"
)

// WriteTimeout bounds a write sent with WriteContext.
const WriteTimeout = time.Minute

// WriteContext is the context of a write about to be sent: not cut short when ctx is cancelled
// (Ctrl-C stops the work before its next write, never in the middle of one, so that a write the
// API server may have applied is always known and reported), bounded by WriteTimeout.
func WriteContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), WriteTimeout)
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/conveyor-ml/conveyor/objstore"
)

// commandContext returns the context a command runs in. It ends at the first SIGINT
// (Ctrl-C) or SIGTERM, so that the command's requests stop and it returns, saying so
// (interrupted); the signals' default comes back then, so that a second one kills at
// once. stop, deferred by the caller, restores it too.
func commandContext() (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

// interrupted returns err, saying that the command was interrupted when ctx ended
// first.
func interrupted(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("interrupted (%v): %w", context.Cause(ctx), err)
}

// signalsKill gives SIGINT and SIGTERM their default back, ending the process at once,
// for work that takes no context and leaves nothing to clean up: checking a local
// dataset.
func signalsKill() { signal.Reset(os.Interrupt, syscall.SIGTERM) }

// closeOnCancel closes the shard cache c, if any, when ctx ends. What waits for a shard
// being fetched without a context of its own (a loader's reader, a check reading
// records: fs.FS has no context) is then failed at once, and the fetches stop. The
// function returned stops watching.
func closeOnCancel(ctx context.Context, c *objstore.ShardCache) (stop func() bool) {
	if c == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(ctx, func() { c.Close() })
}

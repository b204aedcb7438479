package cache

import (
	"fmt"
	"runtime/debug"
)

// A read-only cache reads records straight from its mappings of the shards. A shard
// truncated while mapped (or rewritten in place by another program) leaves pages of the
// mapping with no file behind them, and touching one raises SIGBUS, which the Go runtime
// turns into a fatal error unless the goroutine asked for a panic instead. Every read of
// mapped memory (Read's checksums, Decode's codecs) therefore runs with
// debug.SetPanicOnFault set and recovers the fault as an error about the record: the
// sample is bad, the process goes on.

// faultAddr is what a panic raised for a memory fault carries.
type faultAddr interface{ Addr() uintptr }

// guardFault is deferred, with the previous SetPanicOnFault setting, around reads of
// mapped memory:
//
//	defer c.guardFault(r, &err, debug.SetPanicOnFault(true))
//
// It restores the setting and turns a memory fault into *err, a damaged record; any
// other panic goes on.
func (c *Cache) guardFault(r Ref, err *error, old bool) {
	debug.SetPanicOnFault(old)
	v := recover()
	if v == nil {
		return
	}
	fa, ok := v.(faultAddr)
	if !ok {
		panic(v)
	}
	r.sh.faulted.Store(true) // later reads of the shard use pread, which fails cleanly
	*err = c.damaged(r, fmt.Errorf("%w: reading the mapped shard faulted at %#x: the file was truncated or replaced while open", ErrCorrupt, fa.Addr()))
}

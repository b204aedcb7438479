// Package pinned provides page-locked (pinned) host buffers for finished batches.
//
// A Pool carves fixed-size buffers out of page-aligned mmap'd slabs, locks them with
// mlock when RLIMIT_MEMLOCK allows (and reports when it had to fall back to unlocked
// memory), and never holds more than its byte budget: Get blocks until a buffer is
// released. A Pool is safe for concurrent use.
//
// New maps the whole budget up front, so memory is committed before training starts and
// a shortage fails New rather than an epoch. Slabs hold up to 64 MiB of buffers each (a
// larger buffer gets a slab of its own) and are passed to Options.Register, which the
// GPU backend uses to register them with the driver.
//
// A Buffer has one owner at a time, from Get until Release; its bytes are valid until
// Release. Releasing twice panics. Close does not wait: it unmaps every slab whose
// buffers are all back and reports the buffers still out as leaked; their slabs stay
// mapped until those buffers are released, so memory a caller may still be writing is
// never unmapped.
//
// On Linux the slabs are anonymous private mappings; elsewhere they come from the Go
// heap and are never locked. Built with the conveyordebug tag, Release fills each buffer
// with 0xDE to expose reads after release.
//
// Like every package but pipeline, pinned starts no goroutines.
package pinned

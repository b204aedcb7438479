// Package pinned provides page-locked (pinned) host buffers for finished batches.
//
// A Pool carves fixed-size buffers out of page-aligned mmap'd slabs, locks them with
// mlock when RLIMIT_MEMLOCK allows (and reports when it had to fall back to unlocked
// memory), and never holds more than its byte budget: Get blocks until a buffer is
// released. A Pool is safe for concurrent use.
package pinned

// Package cache stores decoded, resized-first samples on disk so that later epochs, or
// later jobs, skip reading and decoding the original files.
//
// A cache is a directory of append-only shard files. Each record holds one sample's
// pixels (8-bit packed RGB, after the resize-first step and before any random
// augmentation), its label and the identity of the file it came from, behind a CRC-32C
// of its header and one of its payload. Beside every shard an index file lists its
// records, so opening a cache reads the indexes, not the shards; records a crashed writer
// appended without indexing are found by scanning the shard's tail.
//
// A record is found by its Key: the source file's identity (path, size, modification
// time, and optionally a content hash) together with the decode spec and FormatVersion.
// A changed file or a changed spec therefore misses instead of serving stale pixels.
//
// Several processes may share a directory. Each writer appends only to shards it
// created and holds an exclusive lock on (flock), directory changes are serialised by a
// lock file, and Refresh picks up what other processes wrote. A writer killed at any
// point leaves every complete record readable.
//
// A converted dataset (conveyor convert) adds dataset.json (Info): whether the conversion
// completed, and a manifest of its shards (sizes, record counts, checksums of headers and
// indexes, and a CRC-32C of each whole shard, which a reader from object storage checks
// each shard against when it is fetched) that CheckDataset and VerifyDataset compare the directory with, so that a lost,
// truncated or damaged shard is reported rather than silently missing. A conversion holds
// the directory's conversion lock (LockConversion) while it runs. A read-only cache maps
// its shards; a read that faults because a shard was cut short under its mapping returns
// ErrCorrupt instead of crashing the process.
//
// A Cache is safe for concurrent use; a Coder, which holds one goroutine's codec state
// and buffers, is not. The package starts no goroutines.
package cache

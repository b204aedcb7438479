//go:build linux && !mips && !mipsle && !mips64 && !mips64le

package pinned

// rlimitMemlock is RLIMIT_MEMLOCK, which package syscall does not export.
const rlimitMemlock = 8

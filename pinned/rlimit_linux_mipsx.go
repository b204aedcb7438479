//go:build linux && (mips || mipsle || mips64 || mips64le)

package pinned

// rlimitMemlock is RLIMIT_MEMLOCK, which package syscall does not export; MIPS numbers
// it differently from the other Linux ports.
const rlimitMemlock = 9

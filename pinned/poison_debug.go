//go:build conveyordebug

package pinned

// poisonReleased makes Release fill buffers with poisonByte, so a consumer that keeps
// reading a batch after releasing it sees 0xDE garbage instead of plausible pixels.
const poisonReleased = true

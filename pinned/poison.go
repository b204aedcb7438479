//go:build !conveyordebug

package pinned

// poisonReleased is set by the conveyordebug build tag.
const poisonReleased = false

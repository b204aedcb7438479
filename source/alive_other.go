//go:build !unix

package source

// processAlive cannot tell here: a lease is then stale only by its age.
func processAlive(pid int) bool { return true }

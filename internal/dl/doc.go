// Package dl opens shared libraries and calls their C functions at run time without cgo,
// through github.com/ebitengine/purego on the platforms it supports (Linux, macOS and
// FreeBSD on amd64 and arm64). Elsewhere Open fails and the optional native decoders
// that use it stay off.
package dl

// Package turbojpeg decodes JPEG images with libjpeg-turbo, found at run time.
//
// The library (libturbojpeg.so.0, the TurboJPEG 2.x API) is opened with
// github.com/ebitengine/purego, so the package needs neither cgo nor a build
// tag and works with CGO_ENABLED=0. Where the library is absent [Load]
// returns an error and callers use image/jpeg instead.
//
// A [Decompressor] decodes into a caller-owned packed RGB buffer, optionally
// scaled down by one of libjpeg-turbo's DCT scaling factors (1/2, 1/4, 1/8
// ...), which skips most of the IDCT and upsampling work. On a 500x375 4:2:0
// JPEG it takes about 0.9 ms (0.65 ms at 1/2) against about 4.3 ms for
// image/jpeg's decode to YCbCr, on one contended core (see the benchmarks).
// It uses the default accurate integer DCT and libjpeg's smooth ("fancy")
// chroma upsampling. Against image/jpeg plus color.YCbCrToRGB the mean
// difference is under 1.5 per channel; at sharp chroma edges single pixels
// differ by up to about 20, because image/jpeg replicates chroma samples.
// With TJFLAG_FASTUPSAMPLE (not used) the two agree within 3.
//
// A decode costs five small Go allocations (about 700 bytes), all inside
// purego v0.8.4's SyscallN, which heap-allocates its argument block: three
// C calls, because each decode starts from a fresh libjpeg instance so that
// tables left by the previous file cannot leak into this one.
//
// # Errors and warnings
//
// Corrupt data never crashes the process: libjpeg-turbo reports it and the
// call returns an [*Error]. Decoding runs with TJFLAG_STOPONWARNING, so the
// first libjpeg warning (truncated file, corrupt entropy data, extraneous
// bytes before a marker) stops the decode and is returned as an [*Error] with
// Warning set. Without that flag libjpeg "completes" a truncated file with
// gray rows and reports a warning, and tjGetErrorCode cannot tell a warning
// that was followed by a fatal error (a partial image) from one that was not,
// so a warning is never treated as success. Callers that want to accept
// benign damage (extraneous bytes are the common case in real datasets) can
// fall back to image/jpeg, which accepts those and rejects data loss.
//
// # Concurrency
//
// [Load] and [*Lib] are safe for concurrent use. A [Decompressor] is not: use
// one per goroutine. Several Decompressors may decode in parallel.
package turbojpeg

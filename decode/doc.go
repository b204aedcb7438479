// Package decode turns encoded image bytes into 8-bit packed RGB pixels.
//
// It recognises the format by content (JPEG, PNG, GIF, BMP, TIFF, WebP), checks the
// header's width×height against a pixel limit and against what the file's size can hold
// before allocating any pixels, applies JPEG EXIF orientation, drops alpha like PIL's
// convert('RGB'), and applies a resize-first policy (shorter side, fit inside, or none)
// with an antialiasing filter right after decoding, so later stages never touch more
// pixels than they need. DecodeRegion decodes a crop resampled to a given size (the
// crop-aware decode behind RandomResizedCrop): only the crop is converted and resampled.
//
// Native decoders are opened at run time without cgo when present: libjpeg-turbo
// (libturbojpeg.so.0) for JPEG, at a reduced DCT scale when the resize or the crop
// allows; libwebp (libwebp.so.7) for WebP; libdeflate (libdeflate.so.0) to inflate 8-bit,
// non-interlaced PNGs. Otherwise, and with Options.Backend "go" or CONVEYOR_DECODER=go,
// Go decodes: sequential (baseline and extended) JPEGs with the package's own decoder,
// about twice as fast as image/jpeg, which inverse-transforms only the blocks of a crop
// and whose inverse DCT is libjpeg's accurate integer one; everything else with the
// standard library and golang.org/x/image. WebP and PNG give identical pixels either way
// (lossy WebP from x/image/webp is converted with libwebp's own YUV arithmetic, so it
// matches PIL exactly); JPEG differs by about one unit per channel (both upsample chroma
// with libjpeg-turbo's triangle filter; the colour conversions' rounding differs, and
// image/jpeg's inverse DCT for progressive files).
//
// Resizer is the resampling kernel (PIL's antialiased bilinear filter in fixed point,
// with AVX2 assembly on amd64, within ±1 of Pillow; with Resizer.Exact, Pillow 9.4's
// arithmetic bit for bit); package augment uses it for crops. Options.Exact makes a
// Decoder's pixels Pillow's: full decoding, then Resizer.Exact. When a resize follows
// a JPEG decode, on either backend, the JPEG's planes are resampled one by one with the
// same filter (luma from the crop, chroma from the same region of its subsampled planes)
// and converted to RGB once, at the output size.
//
// Decoder.Footprint bounds the memory a decode takes before it runs, from the header
// and the decoder that will take the file: a loader reserves what is actually decoded
// (a DCT-scaled, resize-first JPEG needs a small fraction of its full-size pixels)
// rather than a fixed number of bytes per header pixel.
//
// A Decoder holds reusable scratch memory and is not safe for concurrent use; give each
// worker its own. The functions Sniff and ReadConfig are safe for concurrent use.
//
// # Adding a backend
//
// Each decoder is a backend (backend.go): it names itself, says which headers it
// accepts, decodes a region of the stored image at a scale of its choosing into RGB or
// into planes, or declines so that the next backend is tried, and estimates its memory
// for Footprint. A Decoder tries the entries of registry in order (native libraries
// first, then pure Go, the standard library last, which takes every format and decides
// what the others decline). Adding a backend is one file, holding its type, open
// function and methods, plus one entry in registry.
package decode

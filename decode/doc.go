// Package decode turns encoded image bytes into 8-bit packed RGB pixels.
//
// It recognises the format by content (JPEG, PNG, GIF, BMP, TIFF, WebP), checks the
// header's width×height against a pixel limit before allocating any pixels, applies JPEG
// EXIF orientation, drops alpha like PIL's convert('RGB'), and applies a resize-first
// policy (shorter side, fit inside, or none) with an antialiasing filter right after
// decoding, so later stages never touch more pixels than they need.
//
// JPEG decodes with libjpeg-turbo when libturbojpeg.so.0 can be loaded at run time (no
// cgo), at a reduced DCT scale when the resize allows, and with image/jpeg otherwise;
// Options.Backend or CONVEYOR_DECODER=go choose. The other formats decode with the
// standard library and golang.org/x/image. Lossy WebP is converted with libwebp's own
// YUV arithmetic, so it matches PIL exactly.
//
// Resizer is the resampling kernel (PIL's antialiased bilinear filter in fixed point,
// with AVX2 assembly on amd64); package augment uses it for crops.
//
// A Decoder holds reusable scratch memory and is not safe for concurrent use; give each
// worker its own. The functions Sniff and ReadConfig are safe for concurrent use.
package decode

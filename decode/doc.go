// Package decode turns encoded image bytes into 8-bit packed RGB pixels.
//
// It recognises the format by content (JPEG, PNG, GIF, BMP, TIFF, WebP), checks the
// header's width×height against a pixel limit before allocating any pixels, applies JPEG
// EXIF orientation, drops alpha like PIL's convert('RGB'), and applies a resize-first
// policy (shorter side, fit inside, or none) with an antialiasing filter right after
// decoding, so later stages never touch more pixels than they need.
//
// A Decoder holds reusable scratch memory and is not safe for concurrent use; give each
// worker its own. The functions Sniff and ReadConfig are safe for concurrent use.
package decode

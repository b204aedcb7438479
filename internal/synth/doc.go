// Package synth generates deterministic, photo-like test images and writes
// them in the encodings a training-image loader meets in the wild.
//
// [Generate] paints an image from (seed, class, index): a class-coloured
// gradient background, a few large and many small random ellipses,
// rectangles, polygons and thick lines with their own grain, a sinusoidal and
// value-noise texture, a vignette and per-pixel noise. Each class has its own palette and gradient direction, so a tiny
// linear classifier on downscaled pixels can learn the classes, while shapes,
// texture and noise differ from image to image. The same arguments always
// give the same pixels, on every platform.
//
// [Encode] writes an image as one of the [Format] values: baseline,
// progressive, 4:4:4 and grayscale JPEG (from a small encoder in this package,
// because image/jpeg writes only baseline 4:2:0), 8-bit, RGBA, 16-bit, gray
// and palette PNG, GIF, BMP and TIFF. [WithOrientation] adds an EXIF
// orientation tag to a JPEG. [WriteTree] and [ImageNetLike] lay out whole
// ImageFolder trees (root/<class>/<file>) for tests and benchmarks.
//
// The package is meant for tests, examples and benchmarks; nothing in the
// loader itself depends on it. All functions are safe for concurrent use.
package synth

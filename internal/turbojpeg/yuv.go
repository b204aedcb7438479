package turbojpeg

import (
	"fmt"
	"runtime"
	"unsafe"
)

// mcuSize is tjMCUWidth and tjMCUHeight: the MCU of each subsampling, in luma pixels.
var mcuSize = [...][2]int{SAMP444: {8, 8}, SAMP422: {16, 8}, SAMP420: {16, 16}, SAMPGray: {8, 8}, SAMP440: {8, 16}, SAMP411: {32, 8}}

// PlaneSize returns the width and height of plane comp (0 luma, 1 and 2 chroma) of a
// width x height image with subsampling subsamp, as tjPlaneWidth and tjPlaneHeight do:
// luma padded to a whole number of chroma samples, chroma at its subsampled size.
func PlaneSize(comp, width, height, subsamp int) (int, int) {
	m := mcuSize[subsamp]
	fx, fy := m[0]/8, m[1]/8
	pw, ph := (width+fx-1)/fx*fx, (height+fy-1)/fy*fy
	if comp == 0 {
		return pw, ph
	}
	return pw / fx, ph / fy
}

// DecodeYUV decodes jpeg at scaling factor num/denom into separate Y, Cb and Cr planes
// (tjDecompressToYUVPlanes): the raw planes of the JPEG, chroma still subsampled, with
// neither upsampling nor colour conversion. It returns the planes, the scaled size w x h
// and the subsampling (SAMP*); plane i is PlaneSize(i, w, h, subsamp), rows that many
// bytes wide, and a greyscale JPEG (SAMPGray) has plane 0 only. grow returns, for a
// plane and its size in bytes, a slice of at least that size: the caller owns the memory.
//
// Only YCbCr and greyscale JPEGs with a subsampling listed here decode; others
// return an error wrapping ErrUnsupported. Warnings stop the decode, as in DecodeRGB.
func (d *Decompressor) DecodeYUV(jpeg []byte, num, denom int, grow func(plane, n int) []byte) (planes [3][]byte, width, height, subsamp int, err error) {
	st := d.st
	if st == nil {
		return planes, 0, 0, 0, ErrClosed
	}
	if !d.lib.validFactor(num, denom) {
		return planes, 0, 0, 0, fmt.Errorf("turbojpeg: scaling factor %d/%d is not one of tjGetScalingFactors", num, denom)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st.dirty {
		if err := d.reset(); err != nil {
			return planes, 0, 0, 0, err
		}
	}
	w, h, subsamp, cs, err := d.header(jpeg)
	if err != nil {
		return planes, 0, 0, 0, err
	}
	if (cs != CSYCbCr && cs != CSGray) || subsamp < 0 || subsamp >= len(mcuSize) {
		return planes, 0, 0, 0, fmt.Errorf("%w: colorspace %d, subsampling %d to YUV planes", ErrUnsupported, cs, subsamp)
	}
	sw, sh := ScaledSize(w, h, num, denom)
	n := 3
	if subsamp == SAMPGray {
		n = 1
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	for i := range 3 {
		st.planes[i], st.strides[i] = 0, 0
		if i >= n {
			continue
		}
		pw, ph := PlaneSize(i, sw, sh, subsamp)
		p := grow(i, pw*ph)
		if len(p) < pw*ph {
			return planes, 0, 0, 0, fmt.Errorf("turbojpeg: plane %d holds %d bytes, needs %d", i, len(p), pw*ph)
		}
		planes[i] = p[:pw*ph]
		pin.Pin(&planes[i][0])
		st.planes[i], st.strides[i] = uintptr(unsafe.Pointer(&planes[i][0])), int32(pw)
	}
	// The library writes sh rows of each plane's width, within the sizes above.
	rc := tjDecompressToYUVPlanes(d.lib.decompressYUV, st.h,
		unsafe.Pointer(unsafe.SliceData(jpeg)), uintptr(len(jpeg)),
		unsafe.Pointer(&st.planes[0]), sw, unsafe.Pointer(&st.strides[0]), sh, decodeFlags)
	runtime.KeepAlive(jpeg)
	runtime.KeepAlive(planes)
	runtime.KeepAlive(d) // else its cleanup may tjDestroy st.h during the call
	st.dirty = true
	if rc != 0 {
		return planes, 0, 0, 0, d.lib.lastError("tjDecompressToYUVPlanes", st.h)
	}
	return planes, sw, sh, subsamp, nil
}

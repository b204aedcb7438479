; Per-pixel body of the conversion kernels: uint8 NHWC in, float32 / float16 / bfloat16
; out, NCHW or NHWC, optionally normalised. Target-independent: nvptx.ll wraps it into
; CUDA kernels, and the tests compile it for the host to check it against
; augment.Packer bit for bit (see README.md).
;
; The arithmetic is torchvision's, each step rounded to float32 as augment.Packer does:
;   t = float(x) / 255; if norm: t = (t - mean[c]) / std[c]
; Plain fdiv/fsub (no fast-math flags) are IEEE-correct on every target, and there is no
; multiply-add for a backend to contract.

define internal float @value(i8* %in, i64 %i, i64 %c, i32 %norm, float %m, float %s) alwaysinline {
entry:
  %i3 = mul i64 %i, 3
  %idx = add i64 %i3, %c
  %p = getelementptr inbounds i8, i8* %in, i64 %idx
  %x = load i8, i8* %p, align 1
  %f = uitofp i8 %x to float
  %t = fdiv float %f, 2.550000e+02
  %isnorm = icmp ne i32 %norm, 0
  br i1 %isnorm, label %normalise, label %done
normalise:
  %d = fsub float %t, %m
  %q = fdiv float %d, %s
  ret float %q
done:
  ret float %t
}

; outbase is where channel 0 of pixel i goes: NCHW n*3*plane + p, with n = i / plane and
; p = i % plane; NHWC i*3. Channel c goes c*stride further on.
define internal i64 @outbase(i64 %i, i64 %plane, i32 %nchw) alwaysinline {
entry:
  %isnchw = icmp ne i32 %nchw, 0
  br i1 %isnchw, label %planar, label %packed
planar:
  %n = udiv i64 %i, %plane
  %px = urem i64 %i, %plane
  %n3 = mul i64 %n, 3
  %base = mul i64 %n3, %plane
  %o = add i64 %base, %px
  ret i64 %o
packed:
  %i3 = mul i64 %i, 3
  ret i64 %i3
}

define internal i64 @stride(i64 %plane, i32 %nchw) alwaysinline {
entry:
  %isnchw = icmp ne i32 %nchw, 0
  %s = select i1 %isnchw, i64 %plane, i64 1
  ret i64 %s
}

; bf16 rounds a float32 to bfloat16 bits, to nearest with ties to even; a NaN stays a
; quiet NaN.
define internal i16 @bf16(float %v) alwaysinline {
entry:
  %b = bitcast float %v to i32
  %abs = and i32 %b, 2147483647
  %isnan = icmp ugt i32 %abs, 2139095040
  br i1 %isnan, label %nan, label %round
nan:
  %hi = lshr i32 %b, 16
  %q = or i32 %hi, 64
  %qn = trunc i32 %q to i16
  ret i16 %qn
round:
  %hi2 = lshr i32 %b, 16
  %lsb = and i32 %hi2, 1
  %bias = add i32 %lsb, 32767
  %r = add i32 %b, %bias
  %rh = lshr i32 %r, 16
  %rn = trunc i32 %rh to i16
  ret i16 %rn
}

define void @conveyor_pixel_f32(i8* %in, float* %out, i64 %i, i64 %plane, i32 %nchw, i32 %norm,
    float %m0, float %m1, float %m2, float %s0, float %s1, float %s2) alwaysinline {
entry:
  %v0 = call float @value(i8* %in, i64 %i, i64 0, i32 %norm, float %m0, float %s0)
  %v1 = call float @value(i8* %in, i64 %i, i64 1, i32 %norm, float %m1, float %s1)
  %v2 = call float @value(i8* %in, i64 %i, i64 2, i32 %norm, float %m2, float %s2)
  %o0 = call i64 @outbase(i64 %i, i64 %plane, i32 %nchw)
  %st = call i64 @stride(i64 %plane, i32 %nchw)
  %o1 = add i64 %o0, %st
  %o2 = add i64 %o1, %st
  %p0 = getelementptr inbounds float, float* %out, i64 %o0
  %p1 = getelementptr inbounds float, float* %out, i64 %o1
  %p2 = getelementptr inbounds float, float* %out, i64 %o2
  store float %v0, float* %p0, align 4
  store float %v1, float* %p1, align 4
  store float %v2, float* %p2, align 4
  ret void
}

define void @conveyor_pixel_f16(i8* %in, i16* %out, i64 %i, i64 %plane, i32 %nchw, i32 %norm,
    float %m0, float %m1, float %m2, float %s0, float %s1, float %s2) alwaysinline {
entry:
  %v0 = call float @value(i8* %in, i64 %i, i64 0, i32 %norm, float %m0, float %s0)
  %v1 = call float @value(i8* %in, i64 %i, i64 1, i32 %norm, float %m1, float %s1)
  %v2 = call float @value(i8* %in, i64 %i, i64 2, i32 %norm, float %m2, float %s2)
  %h0 = fptrunc float %v0 to half
  %h1 = fptrunc float %v1 to half
  %h2 = fptrunc float %v2 to half
  %b0 = bitcast half %h0 to i16
  %b1 = bitcast half %h1 to i16
  %b2 = bitcast half %h2 to i16
  %o0 = call i64 @outbase(i64 %i, i64 %plane, i32 %nchw)
  %st = call i64 @stride(i64 %plane, i32 %nchw)
  %o1 = add i64 %o0, %st
  %o2 = add i64 %o1, %st
  %p0 = getelementptr inbounds i16, i16* %out, i64 %o0
  %p1 = getelementptr inbounds i16, i16* %out, i64 %o1
  %p2 = getelementptr inbounds i16, i16* %out, i64 %o2
  store i16 %b0, i16* %p0, align 2
  store i16 %b1, i16* %p1, align 2
  store i16 %b2, i16* %p2, align 2
  ret void
}

define void @conveyor_pixel_bf16(i8* %in, i16* %out, i64 %i, i64 %plane, i32 %nchw, i32 %norm,
    float %m0, float %m1, float %m2, float %s0, float %s1, float %s2) alwaysinline {
entry:
  %v0 = call float @value(i8* %in, i64 %i, i64 0, i32 %norm, float %m0, float %s0)
  %v1 = call float @value(i8* %in, i64 %i, i64 1, i32 %norm, float %m1, float %s1)
  %v2 = call float @value(i8* %in, i64 %i, i64 2, i32 %norm, float %m2, float %s2)
  %b0 = call i16 @bf16(float %v0)
  %b1 = call i16 @bf16(float %v1)
  %b2 = call i16 @bf16(float %v2)
  %o0 = call i64 @outbase(i64 %i, i64 %plane, i32 %nchw)
  %st = call i64 @stride(i64 %plane, i32 %nchw)
  %o1 = add i64 %o0, %st
  %o2 = add i64 %o1, %st
  %p0 = getelementptr inbounds i16, i16* %out, i64 %o0
  %p1 = getelementptr inbounds i16, i16* %out, i64 %o1
  %p2 = getelementptr inbounds i16, i16* %out, i64 %o2
  store i16 %b0, i16* %p0, align 2
  store i16 %b1, i16* %p1, align 2
  store i16 %b2, i16* %p2, align 2
  ret void
}

; CUDA entry points of the conversion kernels: one thread per pixel, blocks of any size
; in x, as many as cover the pixels. Parameters, in order (gpu/cuda.go kernelArgs):
;   in (u8*, NHWC), out, pixels (N*H*W), plane (H*W), nchw, norm, mean[3], std[3]
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare void @conveyor_pixel_f32(i8*, float*, i64, i64, i32, i32, float, float, float, float, float, float)
declare void @conveyor_pixel_f16(i8*, i16*, i64, i64, i32, i32, float, float, float, float, float, float)
declare void @conveyor_pixel_bf16(i8*, i16*, i64, i64, i32, i32, float, float, float, float, float, float)

define void @conveyor_u8_to_f32(i8* %in, float* %out, i64 %pixels, i64 %plane, i32 %nchw, i32 %norm, float %m0, float %m1, float %m2, float %s0, float %s1, float %s2) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %c64 = zext i32 %ctaid to i64
  %n64 = zext i32 %ntid to i64
  %t64 = zext i32 %tid to i64
  %blk = mul i64 %c64, %n64
  %i = add i64 %blk, %t64
  %ok = icmp ult i64 %i, %pixels
  br i1 %ok, label %work, label %done
work:
  call void @conveyor_pixel_f32(i8* %in, float* %out, i64 %i, i64 %plane, i32 %nchw, i32 %norm, float %m0, float %m1, float %m2, float %s0, float %s1, float %s2)
  br label %done
done:
  ret void
}

define void @conveyor_u8_to_f16(i8* %in, i16* %out, i64 %pixels, i64 %plane, i32 %nchw, i32 %norm, float %m0, float %m1, float %m2, float %s0, float %s1, float %s2) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %c64 = zext i32 %ctaid to i64
  %n64 = zext i32 %ntid to i64
  %t64 = zext i32 %tid to i64
  %blk = mul i64 %c64, %n64
  %i = add i64 %blk, %t64
  %ok = icmp ult i64 %i, %pixels
  br i1 %ok, label %work, label %done
work:
  call void @conveyor_pixel_f16(i8* %in, i16* %out, i64 %i, i64 %plane, i32 %nchw, i32 %norm, float %m0, float %m1, float %m2, float %s0, float %s1, float %s2)
  br label %done
done:
  ret void
}

define void @conveyor_u8_to_bf16(i8* %in, i16* %out, i64 %pixels, i64 %plane, i32 %nchw, i32 %norm, float %m0, float %m1, float %m2, float %s0, float %s1, float %s2) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %c64 = zext i32 %ctaid to i64
  %n64 = zext i32 %ntid to i64
  %t64 = zext i32 %tid to i64
  %blk = mul i64 %c64, %n64
  %i = add i64 %blk, %t64
  %ok = icmp ult i64 %i, %pixels
  br i1 %ok, label %work, label %done
work:
  call void @conveyor_pixel_bf16(i8* %in, i16* %out, i64 %i, i64 %plane, i32 %nchw, i32 %norm, float %m0, float %m1, float %m2, float %s0, float %s1, float %s2)
  br label %done
done:
  ret void
}

!nvvm.annotations = !{!0, !1, !2}
!0 = !{void (i8*, float*, i64, i64, i32, i32, float, float, float, float, float, float)* @conveyor_u8_to_f32, !"kernel", i32 1}
!1 = !{void (i8*, i16*, i64, i64, i32, i32, float, float, float, float, float, float)* @conveyor_u8_to_f16, !"kernel", i32 1}
!2 = !{void (i8*, i16*, i64, i64, i32, i32, float, float, float, float, float, float)* @conveyor_u8_to_bf16, !"kernel", i32 1}

//! ImageDecoder `(encoded: uint8[N])` → `uint8[H, W, C]`: PNG, JPEG, BMP, PNM, TIFF and WebP
//! through the `image` crate, in RGB, BGR or grayscale. The dims are the image's, so generated
//! code needs the encoded bytes as a constant (the compiler then decodes them once).
use super::{input, EmitCx, OpDef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};

/// The largest width or height decoded.
#[cfg(feature = "image")]
const MAX_SIDE: u32 = 16384;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PixelFormat {
    Rgb,
    Bgr,
    Grayscale,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImageDecoder {
    pub format: PixelFormat,
}

impl ImageDecoder {
    #[cfg(feature = "image")]
    fn channels(&self) -> usize {
        if self.format == PixelFormat::Grayscale {
            1
        } else {
            3
        }
    }

    #[cfg(not(feature = "image"))]
    fn decode(&self, _: &[u8]) -> R<Tensor> {
        Err("this burnc was built without ImageDecoder (feature `image`)".into())
    }

    #[cfg(not(feature = "image"))]
    fn dims(&self, bytes: &[u8]) -> R<[usize; 3]> {
        self.decode(bytes).map(|_| [0; 3])
    }

    /// The output's dims from the image's header, without decoding its pixels.
    #[cfg(feature = "image")]
    fn dims(&self, bytes: &[u8]) -> R<[usize; 3]> {
        let (w, h) = reader(bytes)?.into_dimensions().map_err(|e| format!("cannot read the image: {e}"))?;
        if w > MAX_SIDE || h > MAX_SIDE {
            return Err(format!("cannot decode the image: {w}x{h} pixels exceeds the limit of {MAX_SIDE} a side"));
        }
        Ok([h as usize, w as usize, self.channels()])
    }

    #[cfg(feature = "image")]
    fn decode(&self, bytes: &[u8]) -> R<Tensor> {
        let img = reader(bytes)?.decode().map_err(|e| format!("cannot decode the image: {e}"))?;
        let rgb = img.to_rgb8();
        let (w, h) = (rgb.width() as usize, rgb.height() as usize);
        let px = rgb.as_raw();
        let data: Vec<u8> = match self.format {
            PixelFormat::Rgb => px.clone(),
            PixelFormat::Bgr => px.chunks_exact(3).flat_map(|p| [p[2], p[1], p[0]]).collect(),
            // ITU-R 601-2 luma in 16-bit fixed point, rounded: what Pillow's convert("L")
            // computes (the ONNX reference decodes with Pillow).
            PixelFormat::Grayscale => px
                .chunks_exact(3)
                .map(|p| ((p[0] as u32 * 19595 + p[1] as u32 * 38470 + p[2] as u32 * 7471 + 0x8000) >> 16) as u8)
                .collect(),
        };
        Ok(Tensor::new(vec![h, w, self.channels()], Data::U8(data)))
    }
}

/// A reader of the encoded image. A file is untrusted: a header may claim any size, so the
/// decoder's allocations are capped (16384 pixels a side, 256 MiB).
#[cfg(feature = "image")]
fn reader(bytes: &[u8]) -> R<image::ImageReader<std::io::Cursor<&[u8]>>> {
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(256 << 20);
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes)).with_guessed_format().map_err(|e| format!("cannot read the image: {e}"))?;
    reader.limits(limits);
    Ok(reader)
}

impl OpDef for ImageDecoder {
    name!("ImageDecoder");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        if x.dtype != DType::U8 {
            return Err(format!("the encoded image must be uint8, got {}", x.dtype));
        }
        if let Some(d) = &x.dims {
            if d.len() != 1 {
                return Err(format!("the encoded image must be 1-D, got rank {}", d.len()));
            }
        }
        let dims = match &x.value {
            Some(Tensor { data: Data::U8(bytes), .. }) => Some(self.dims(bytes)?.iter().map(|&d| DimExpr::constant(d as i64)).collect()),
            Some(_) => return Err("the encoded image must be uint8".into()),
            None => None,
        };
        Ok(vec![OutType { dtype: DType::U8, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let Data::U8(bytes) = &x.data else { return Err(format!("the encoded image must be uint8, got {}", x.dtype())) };
        Ok(vec![self.decode(bytes)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        Err(cx.err("the output's dims are the image's: make the encoded image a constant"))
    }

    fn flops(&self, _: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        None
    }

    shape_inputs!(_);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2×1 BMP (24-bit, bottom-up rows padded to 4 bytes) of a red and a green pixel.
    fn bmp() -> Vec<u8> {
        let mut b = Vec::new();
        let row = [0u8, 0, 255, 0, 255, 0, 0, 0]; // BGR red, BGR green, padding
        b.extend_from_slice(b"BM");
        b.extend_from_slice(&(54u32 + 8).to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&54u32.to_le_bytes());
        b.extend_from_slice(&40u32.to_le_bytes());
        b.extend_from_slice(&2i32.to_le_bytes());
        b.extend_from_slice(&1i32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&24u16.to_le_bytes());
        b.extend_from_slice(&[0; 24]);
        b.extend_from_slice(&row);
        b
    }

    #[test]
    fn decodes_in_each_pixel_format() {
        let x = Tensor::new(vec![62], Data::U8(bmp()));
        let run = |format| ImageDecoder { format }.eval(&[Some(&x)]).expect("decode").remove(0);
        assert_eq!(run(PixelFormat::Rgb), Tensor::new(vec![1, 2, 3], Data::U8(vec![255, 0, 0, 0, 255, 0])));
        assert_eq!(run(PixelFormat::Bgr).data, Data::U8(vec![0, 0, 255, 0, 255, 0]));
        assert_eq!(run(PixelFormat::Grayscale), Tensor::new(vec![1, 2, 1], Data::U8(vec![76, 150])));
    }

    #[test]
    fn garbage_is_an_error() {
        let x = Tensor::new(vec![4], Data::U8(vec![1, 2, 3, 4]));
        assert!(ImageDecoder { format: PixelFormat::Rgb }.eval(&[Some(&x)]).is_err());
    }
}

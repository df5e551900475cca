//! Screenshots: the X window dump `xwd` writes (a TrueColor ZPixmap) read into RGB, halved
//! until its PNG fits the cap, and encoded as PNG.

use flate2::write::ZlibEncoder;
use flate2::Compression;
use std::io::Write;

/// An RGB image, 8 bits a channel, rows top to bottom.
pub struct Rgb {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

fn field(data: &[u8], index: usize) -> Result<u32, String> {
    let at = index * 4;
    data.get(at..at + 4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| "the window dump is cut short".to_string())
}

/// The image in an XWD file (as `xwd -root` writes it for a 24- or 32-bit TrueColor screen).
pub fn from_xwd(data: &[u8]) -> Result<Rgb, String> {
    let header_size = field(data, 0)? as usize;
    let (format, width, height) = (field(data, 2)?, field(data, 4)?, field(data, 5)?);
    let byte_order = field(data, 7)?;
    let bits_per_pixel = field(data, 11)?;
    let bytes_per_line = field(data, 12)? as usize;
    let masks = [field(data, 14)?, field(data, 15)?, field(data, 16)?];
    let colors = field(data, 19)? as usize;
    if format != 2 || !(bits_per_pixel == 32 || bits_per_pixel == 24) {
        return Err(format!(
            "unsupported window dump (format {format}, {bits_per_pixel} bits per pixel)"
        ));
    }
    if width == 0 || height == 0 || width > 8192 || height > 8192 {
        return Err(format!("unlikely screen size {width}×{height}"));
    }
    let start = header_size + colors * 12;
    let bytes = (bits_per_pixel / 8) as usize;
    let need = start + bytes_per_line * height as usize;
    if data.len() < need || bytes_per_line < width as usize * bytes {
        return Err("the window dump is cut short".into());
    }
    let shift = |mask: u32| mask.trailing_zeros().min(31);
    let shifts = masks.map(shift);
    let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
    for row in 0..height as usize {
        let line = &data[start + row * bytes_per_line..][..width as usize * bytes];
        for px in line.chunks_exact(bytes) {
            let value = match (bytes, byte_order) {
                (4, 0) => u32::from_le_bytes([px[0], px[1], px[2], px[3]]),
                (4, _) => u32::from_be_bytes([px[0], px[1], px[2], px[3]]),
                (_, 0) => u32::from_le_bytes([px[0], px[1], px[2], 0]),
                _ => u32::from_be_bytes([0, px[0], px[1], px[2]]),
            };
            for (mask, shift) in masks.iter().zip(shifts) {
                pixels.push(((value & mask) >> shift) as u8);
            }
        }
    }
    Ok(Rgb {
        width,
        height,
        pixels,
    })
}

impl Rgb {
    /// The image at half the size (every other pixel of every other row).
    pub fn halved(&self) -> Rgb {
        let (width, height) = ((self.width / 2).max(1), (self.height / 2).max(1));
        let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
        for y in 0..height as usize {
            let row = &self.pixels[(y * 2) * self.width as usize * 3..];
            for x in 0..width as usize {
                pixels.extend_from_slice(&row[x * 6..x * 6 + 3]);
            }
        }
        Rgb {
            width,
            height,
            pixels,
        }
    }

    /// The image as PNG (8-bit RGB, no filtering).
    pub fn png(&self) -> Vec<u8> {
        let mut raw = Vec::with_capacity(self.pixels.len() + self.height as usize);
        for row in self.pixels.chunks_exact(self.width as usize * 3) {
            raw.push(0);
            raw.extend_from_slice(row);
        }
        let mut z = ZlibEncoder::new(Vec::new(), Compression::fast());
        let _ = z.write_all(&raw);
        let compressed = z.finish().unwrap_or_default();
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut header = Vec::with_capacity(13);
        header.extend_from_slice(&self.width.to_be_bytes());
        header.extend_from_slice(&self.height.to_be_bytes());
        header.extend_from_slice(&[8, 2, 0, 0, 0]);
        chunk(&mut out, b"IHDR", &header);
        chunk(&mut out, b"IDAT", &compressed);
        chunk(&mut out, b"IEND", &[]);
        out
    }
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
}

/// The PNG of `image`, halved until it fits `cap` bytes; with its size.
pub fn png_within(mut image: Rgb, cap: usize) -> (Vec<u8>, u32, u32) {
    loop {
        let png = image.png();
        if png.len() <= cap || image.width <= 80 {
            return (png, image.width, image.height);
        }
        image = image.halved();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3×2 32-bit LSB-first dump of red, green, blue / white, black, grey.
    fn dump() -> Vec<u8> {
        let mut fields = [0u32; 25];
        fields[0] = 100 + 4; // header with a 4-byte name
        fields[1] = 7;
        fields[2] = 2;
        fields[3] = 24;
        fields[4] = 3;
        fields[5] = 2;
        fields[7] = 0;
        fields[11] = 32;
        fields[12] = 12;
        fields[14] = 0xff0000;
        fields[15] = 0x00ff00;
        fields[16] = 0x0000ff;
        let mut data: Vec<u8> = fields.iter().flat_map(|f| f.to_be_bytes()).collect();
        data.extend_from_slice(b"xwd\0");
        for px in [
            0xff0000u32,
            0x00ff00,
            0x0000ff,
            0xffffff,
            0x000000,
            0x808080,
        ] {
            data.extend_from_slice(&px.to_le_bytes());
        }
        data
    }

    #[test]
    fn a_window_dump_reads_as_rgb_and_encodes_as_png() {
        let image = from_xwd(&dump()).unwrap();
        assert_eq!((image.width, image.height), (3, 2));
        assert_eq!(
            image.pixels,
            [255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 128, 128, 128]
        );
        let png = image.png();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes([png[16], png[17], png[18], png[19]]), 3);
        let half = image.halved();
        assert_eq!(
            (half.width, half.height, half.pixels),
            (1, 1, vec![255, 0, 0])
        );
        assert!(from_xwd(&dump()[..120]).is_err());
    }
}

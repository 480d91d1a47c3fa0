//! Placeholder until the codec module lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}
impl Compression {
    pub fn from_attributes(attributes: i16) -> Result<Compression, String> {
        match attributes & 7 {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            n => Err(format!("unknown compression codec {n}")),
        }
    }
    pub fn attribute_bits(self) -> i16 {
        self as i16
    }
    pub fn name(self) -> &'static str {
        "x"
    }
}
pub fn compress(_codec: Compression, input: &[u8]) -> Result<Vec<u8>, String> {
    Ok(input.to_vec())
}
pub fn decompress(
    _codec: Compression,
    input: &[u8],
    _limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    out.clear();
    out.extend_from_slice(input);
    Ok(())
}

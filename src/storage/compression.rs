//! Kafka's record-batch compression: the codecs a RecordBatch v2 names in its attributes
//! (bits 0-2), each applied to the batch's records section (every byte after the 61-byte
//! header) as one stream.
//!
//! # Framing, codec by codec
//! * `none` (0): the records section as it is.
//! * `gzip` (1): a gzip stream (RFC 1952) at deflate level 6, as Java's `GZIPOutputStream`
//!   writes it. Reading takes several members back to back, as Java's `GZIPInputStream` does,
//!   and checks each member's CRC-32 and length trailer.
//! * `snappy` (2): two framings are in use. The Java client (snappy-java's
//!   `SnappyOutputStream`) writes xerial framing, and so does [`compress`]:
//!   ```text
//!   header (16 bytes)  0x82 "SNAPPY" 0x00 | version u32 BE = 1 | compatible version u32 BE = 1
//!   then per block     length u32 BE | a raw snappy block of at most 32 KiB uncompressed
//!   ```
//!   librdkafka writes the whole section as one raw snappy block, without framing. Reading
//!   takes xerial framing when the input starts with its magic and raw snappy otherwise, as
//!   snappy-java does, and skips a header repeated between blocks (concatenated streams).
//! * `lz4` (3): the LZ4 frame format (magic 0x184D2204), never bare LZ4 blocks. We write the
//!   descriptor Java's `Lz4BlockOutputStream` writes: FLG 0x60 (version 1, independent blocks,
//!   no checksums, no content size), BD 0x40 (64 KiB blocks). Java's reader refuses linked
//!   blocks, so we never write them. Reading takes every flag combination (block and content
//!   checksums verified, a content size checked against the output, linked blocks) and
//!   frames back to back; a frame that ends before its end mark is an error.
//! * `zstd` (4): zstd frames (RFC 8878) at level 3, Kafka's default. Reading takes frames
//!   back to back and skips skippable frames.
//!
//! Input cut exactly between two gzip members, LZ4 or zstd frames, or xerial blocks (xerial
//! framing has no end marker) reads as a shorter valid stream. The batch CRC, which covers
//! the compressed bytes, catches such a cut; every other cut is an error here.
//!
//! # Bounded decompression
//! [`decompress`] trusts no size the input declares. Output goes into the caller's buffer,
//! which never grows past `limit` bytes: once it is full, a one-byte probe read tells a stream
//! that ends there from one that goes on, and the latter fails the call. A decompression bomb
//! costs at most `limit` bytes of output and the time to produce them. Each decoder's own
//! memory is bounded by a constant or by `limit`:
//! * gzip: miniz_oxide's 32 KiB window and tables; header fields (name, comment, extra) are
//!   copied out of the input, so they are no longer than it.
//! * snappy: nothing but the output. A raw block declares its uncompressed length up front;
//!   it is checked against what is left of `limit` before the output grows for it.
//! * lz4: one block in and one block out, at most 4 MiB each (2 × 4 MiB + 64 KiB for linked
//!   blocks). A declared content size is only compared with the output, never allocated.
//! * zstd: the window, capped with `window_log_max` at the larger of 8 MiB and `limit`. A
//!   frame declaring a larger window (or, single-segment, a larger content size) is refused
//!   before its window is allocated.
//!
//! In all, a call holds at most `limit` bytes of output (while `out` doubles, a copy may
//! briefly hold half that again), a zstd window of at most the larger of 8 MiB and `limit`,
//! and constants of at most about 12 MiB (LZ4's linked 4 MiB blocks). The work done is
//! proportional to the input and to the output actually produced.

use std::io::{self, Read};

use lz4_flex::frame::FrameDecoder;

/// Kafka's compression codecs, as attributes bits 0-2 of a RecordBatch v2 encode them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// Attributes bits 0-2: the codec id.
const CODEC_MASK: i16 = 0b111;

impl Compression {
    /// The codec named by a batch's attributes (bits 0-2); the other bits are ignored.
    ///
    /// # Errors
    /// Codec ids 5-7, which Kafka does not define, with the reason.
    pub fn from_attributes(attributes: i16) -> Result<Compression, String> {
        match attributes & CODEC_MASK {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            id => Err(format!(
                "unknown compression codec id {id} in batch attributes {attributes:#06x}"
            )),
        }
    }

    /// The attribute bits of this codec (0..=4).
    pub fn attribute_bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// "none", "gzip", "snappy", "lz4", "zstd" (Kafka's compression.type names).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Deflate level for gzip: Java's `Deflater.DEFAULT_COMPRESSION`, Kafka's default
/// `compression.gzip.level`.
const GZIP_LEVEL: u32 = 6;
/// Kafka's default `compression.zstd.level` (zstd's own default).
const ZSTD_LEVEL: i32 = 3;

/// snappy-java's stream header: the magic, then version 1 and compatible version 1 (u32 BE).
const XERIAL_HEADER: [u8; 16] = *b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// The part of the header that tells xerial framing from raw snappy: its first 8 bytes.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
/// Uncompressed bytes per xerial block: `SnappyOutputStream`'s default, which Kafka's Java
/// client keeps.
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;

/// An LZ4 frame's magic number (little-endian on the wire). The legacy and skippable magics
/// are refused: no Kafka client writes them and Java's reader refuses them too.
const LZ4_FRAME_MAGIC: u32 = 0x184D_2204;
/// Magic, FLG, BD and the header checksum: the frame header without its optional fields.
const LZ4_MIN_HEADER_LEN: usize = 7;
/// FLG bits that add fields to a frame: a dictionary id (4 bytes, in the header), a content
/// checksum (4 bytes, after the end mark), a content size (8 bytes, in the header), a
/// checksum per block (4 bytes after each block).
const LZ4_FLG_DICT_ID: u8 = 0x01;
const LZ4_FLG_CONTENT_CHECKSUM: u8 = 0x04;
const LZ4_FLG_CONTENT_SIZE: u8 = 0x08;
const LZ4_FLG_BLOCK_CHECKSUM: u8 = 0x10;
/// Bit 31 of a block's size field: the block is stored uncompressed.
const LZ4_BLOCK_UNCOMPRESSED: u32 = 0x8000_0000;

/// The smallest zstd window cap, 2^23 = 8 MiB: the largest window zstd chooses at levels 1-19
/// (Kafka's default level 3 uses 2 MiB), so streams whose size the compressor did not know
/// still decode under a small `limit`.
const ZSTD_WINDOW_LOG_FLOOR: u32 = 23;
/// The largest window log zstd accepts on every target (`ZSTD_WINDOWLOG_MAX_32`).
const ZSTD_WINDOW_LOG_CEILING: u32 = 30;

/// Output bytes asked of a streaming decoder per read: large enough that a call does real
/// work, small enough that the buffer never runs far ahead of what was decoded.
const READ_CHUNK: usize = 64 * 1024;

/// Compresses a records section as Kafka's Java producer would lay it out (gzip stream;
/// snappy in xerial framing; LZ4 frame format; zstd frame). Compression::None copies.
///
/// # Errors
/// A codec library failing, with the codec named; none does on any input we know of.
pub fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, String> {
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => compress_gzip(input),
        Compression::Snappy => compress_snappy(input),
        Compression::Lz4 => compress_lz4(input),
        Compression::Zstd => zstd::bulk::compress(input, ZSTD_LEVEL).map_err(Failure::from),
    }
    .map_err(|failure: Failure| failure.describe("compress", codec))
}

/// Decompresses `input` into `out` (cleared first). Memory use is bounded by about `limit`
/// plus a constant, whatever the input claims (see the module docs). Snappy accepts both
/// xerial framing (Java clients) and raw snappy (librdkafka). Compression::None copies (also
/// bounded by `limit`).
///
/// # Errors
/// With a reason naming the codec, and `out` left empty: the input is not valid for the codec
/// (garbage, truncated, a checksum mismatch, an empty stream), or the output would exceed
/// `limit` bytes (a decompression bomb, a lying length field, a zstd window larger than the
/// cap).
pub fn decompress(
    codec: Compression,
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    out.clear();
    let result = match codec {
        Compression::None if input.len() > limit => Err(Failure::OverLimit { limit }),
        Compression::None => {
            out.extend_from_slice(input);
            Ok(())
        }
        // Every compressor writes at least a header, even for no records.
        _ if input.is_empty() => Err(Failure::Invalid("empty input".to_string())),
        Compression::Gzip => read_bounded(flate2::bufread::MultiGzDecoder::new(input), limit, out),
        Compression::Snappy => decompress_snappy(input, limit, out),
        Compression::Lz4 => decompress_lz4(input, limit, out),
        Compression::Zstd => zstd_decoder(input, limit).and_then(|d| read_bounded(d, limit, out)),
    };
    result.map_err(|failure| {
        out.clear();
        failure.describe("decompress", codec)
    })
}

/// Why a codec call failed, before it is told as a `String` naming the codec.
enum Failure {
    /// The output would exceed the caller's limit.
    OverLimit { limit: usize },
    /// The input is not valid for the codec (or the codec library failed).
    Invalid(String),
}

impl From<io::Error> for Failure {
    fn from(err: io::Error) -> Self {
        Failure::Invalid(err.to_string())
    }
}

impl Failure {
    fn describe(self, action: &str, codec: Compression) -> String {
        let codec = codec.name();
        match self {
            Failure::OverLimit { limit } => {
                format!("cannot {action} {codec} records: the output exceeds the limit of {limit} bytes")
            }
            Failure::Invalid(reason) => format!("cannot {action} {codec} records: {reason}"),
        }
    }
}

fn compress_gzip(input: &[u8]) -> Result<Vec<u8>, Failure> {
    use std::io::Write as _;
    let level = flate2::Compression::new(GZIP_LEVEL);
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(input.len() / 2), level);
    encoder.write_all(input)?;
    Ok(encoder.finish()?)
}

fn compress_snappy(input: &[u8]) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::with_capacity(XERIAL_HEADER.len() + input.len() / 2);
    out.extend_from_slice(&XERIAL_HEADER);
    let mut encoder = snap::raw::Encoder::new();
    for block in input.chunks(XERIAL_BLOCK_SIZE) {
        let length_at = out.len();
        let start = length_at + 4;
        out.resize(start + snap::raw::max_compress_len(block.len()), 0);
        let written = encoder
            .compress(block, &mut out[start..])
            .map_err(|err| Failure::Invalid(err.to_string()))?;
        out.truncate(start + written);
        // A compressed 32 KiB block is far below 4 GiB.
        let length = u32::try_from(written).map_err(|err| Failure::Invalid(err.to_string()))?;
        out[length_at..start].copy_from_slice(&length.to_be_bytes());
    }
    Ok(out)
}

fn compress_lz4(input: &[u8]) -> Result<Vec<u8>, Failure> {
    use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
    use std::io::Write as _;
    let frame = FrameInfo::new()
        .block_size(BlockSize::Max64KB)
        .block_mode(BlockMode::Independent);
    let mut encoder = FrameEncoder::with_frame_info(frame, Vec::with_capacity(input.len() / 2));
    encoder.write_all(input)?;
    encoder
        .finish()
        .map_err(|err| Failure::Invalid(err.to_string()))
}

/// Reads `decoder` to its end, appending to `out`, and fails as soon as `out` would hold more
/// than `limit` bytes. `out` never grows past `limit`: once it is full, a one-byte probe tells
/// a stream that ends there from one that goes on.
fn read_bounded(mut decoder: impl Read, limit: usize, out: &mut Vec<u8>) -> Result<(), Failure> {
    // `out[filled..]` is zeroed room not yet read into. Each byte is zeroed once, however
    // little each read returns (an LZ4 frame of 1-byte blocks yields 1 byte per read).
    let mut filled = out.len();
    let mut probe = [0; 1];
    loop {
        let buf = if filled < limit {
            if filled == out.len() {
                let want = READ_CHUNK.min(limit - filled);
                reserve_within(out, want, limit);
                out.resize(filled + want, 0);
            }
            &mut out[filled..]
        } else {
            &mut probe[..]
        };
        match decoder.read(buf) {
            Ok(0) => break,
            Ok(_) if filled >= limit => return Err(Failure::OverLimit { limit }),
            Ok(read) => filled += read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err.into()),
        }
    }
    out.truncate(filled);
    Ok(())
}

/// Makes room for `additional` more bytes in `out`, doubling its capacity as `Vec` does (so
/// growth stays amortized) but never past `cap` bytes, unless `out` already holds more.
fn reserve_within(out: &mut Vec<u8>, additional: usize, cap: usize) {
    let needed = out.len() + additional;
    if needed <= out.capacity() {
        return;
    }
    let target = out.capacity().saturating_mul(2).min(cap).max(needed);
    out.reserve_exact(target - out.len());
}

fn decompress_snappy(input: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), Failure> {
    // snappy-java's rule: xerial when a whole header is there and starts with the magic.
    if input.len() < XERIAL_HEADER.len() || !input.starts_with(XERIAL_MAGIC) {
        return decompress_snappy_block(input, limit, out);
    }
    let mut rest = &input[XERIAL_HEADER.len()..];
    while !rest.is_empty() {
        if rest.len() >= XERIAL_HEADER.len() && rest.starts_with(XERIAL_MAGIC) {
            rest = &rest[XERIAL_HEADER.len()..];
            continue;
        }
        let (length, after) = rest.split_first_chunk::<4>().ok_or_else(|| {
            Failure::Invalid(format!(
                "xerial stream ends inside a block length ({} bytes left)",
                rest.len()
            ))
        })?;
        let length = u32::from_be_bytes(*length) as usize;
        if length > after.len() {
            return Err(Failure::Invalid(format!(
                "xerial block of {length} bytes, but only {} remain",
                after.len()
            )));
        }
        let (block, next) = after.split_at(length);
        decompress_snappy_block(block, limit, out)?;
        rest = next;
    }
    Ok(())
}

/// Appends one raw snappy block to `out`, refusing before any allocation a block whose
/// declared length does not fit in what is left of `limit`.
fn decompress_snappy_block(block: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), Failure> {
    let invalid = |err: snap::Error| Failure::Invalid(err.to_string());
    let declared = snap::raw::decompress_len(block).map_err(invalid)?;
    let start = out.len();
    if declared > limit - start {
        return Err(Failure::OverLimit { limit });
    }
    reserve_within(out, declared, limit);
    out.resize(start + declared, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(invalid)?;
    out.truncate(start + written);
    Ok(())
}

/// Decodes the LZ4 frames in `input`, back to back, with one decoder (its block buffers are
/// allocated once, not per frame, and one read goes on across frames).
///
/// The frames are first walked by their block lengths, and each must be complete up to its
/// end mark (and content checksum): `FrameDecoder` takes input that stops at a block boundary,
/// or right after a magic number, as a clean end, so without the walk a truncated frame would
/// decode to a shorter output. The walk checks lengths only; the decoder checks everything
/// else (version, reserved bits, header checksum, block sizes, checksums, content size).
fn decompress_lz4(input: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), Failure> {
    let mut rest = input;
    while !rest.is_empty() {
        rest = skip_lz4_frame(rest)?;
    }
    let frames = Lz4Frames {
        decoder: FrameDecoder::new(input),
    };
    read_bounded(frames, limit, out)
}

/// The output of LZ4 frames back to back. `FrameDecoder` reads one frame, reports the end of
/// its output, and goes on with the next frame only when read again.
struct Lz4Frames<'a> {
    decoder: FrameDecoder<&'a [u8]>,
}

impl Read for Lz4Frames<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let before = self.decoder.get_ref().len();
            let read = self.decoder.read(buf)?;
            let after = self.decoder.get_ref().len();
            if read > 0 || after == 0 {
                return Ok(read);
            }
            // The end of a frame with more input after it: the next frame, unless the
            // decoder made no progress (which the walk before decoding rules out).
            if after == before {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("the decoder stopped with {after} bytes left"),
                ));
            }
        }
    }
}

/// The bytes after the LZ4 frame that starts `input`.
fn skip_lz4_frame(input: &[u8]) -> Result<&[u8], Failure> {
    let truncated = || {
        Failure::Invalid(format!(
            "truncated frame: the input ends before the frame's end mark ({} bytes)",
            input.len()
        ))
    };
    let u32_at = |pos: usize| -> Option<u32> {
        let bytes = input.get(pos..pos.checked_add(4)?)?;
        Some(u32::from_le_bytes(bytes.try_into().ok()?))
    };
    let magic = u32_at(0).ok_or_else(truncated)?;
    if magic != LZ4_FRAME_MAGIC {
        return Err(Failure::Invalid(format!(
            "not an LZ4 frame (magic {magic:#010x}, expected {LZ4_FRAME_MAGIC:#010x})"
        )));
    }
    let flg = *input.get(4).ok_or_else(truncated)?;
    let has = |bit: u8, len: usize| if flg & bit != 0 { len } else { 0 };
    let mut pos = LZ4_MIN_HEADER_LEN + has(LZ4_FLG_CONTENT_SIZE, 8) + has(LZ4_FLG_DICT_ID, 4);
    loop {
        let block = u32_at(pos).ok_or_else(truncated)?;
        pos += 4;
        if block == 0 {
            pos += has(LZ4_FLG_CONTENT_CHECKSUM, 4);
            return input.get(pos..).ok_or_else(truncated);
        }
        let size = (block & !LZ4_BLOCK_UNCOMPRESSED) as usize;
        pos = pos
            .saturating_add(size)
            .saturating_add(has(LZ4_FLG_BLOCK_CHECKSUM, 4));
        if pos > input.len() {
            return Err(truncated());
        }
    }
}

/// A zstd decoder over `input` whose window may not exceed the larger of 8 MiB and `limit`.
fn zstd_decoder(
    input: &[u8],
    limit: usize,
) -> Result<zstd::stream::read::Decoder<'static, &[u8]>, Failure> {
    let mut decoder = zstd::stream::read::Decoder::with_buffer(input)?;
    decoder.window_log_max(zstd_window_log_max(limit))?;
    Ok(decoder)
}

/// log2 of the largest zstd window allowed under `limit`: no more than `limit` (rounded down
/// to a power of two), but at least [`ZSTD_WINDOW_LOG_FLOOR`].
fn zstd_window_log_max(limit: usize) -> u32 {
    limit
        .checked_ilog2()
        .unwrap_or(0)
        .clamp(ZSTD_WINDOW_LOG_FLOOR, ZSTD_WINDOW_LOG_CEILING)
}

#[cfg(test)]
mod tests;

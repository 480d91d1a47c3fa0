//! The codecs against themselves (round trips, exact limits), against an independent RecordBatch
//! v2 implementation (kafka-protocol, whose lz4 and zstd are the C libraries), and against
//! hostile input: bombs, lying length fields, garbage, truncation, random corruption.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression as KafkaProtocolCompression, Record, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType,
};
use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
use proptest::collection::vec;
use proptest::prelude::*;

use super::*;

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];
const COMPRESSED: [Compression; 4] = [
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];
const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

// RecordBatch v2 header fields the cross-check patches (offsets from the batch start).
const BATCH_LENGTH_AT: usize = 8;
const CRC_AT: usize = 17;
/// Where the CRC-32C's coverage starts: the attributes field.
const ATTRIBUTES_AT: usize = 21;
/// The records section: everything after the 61-byte header.
const RECORDS_AT: usize = 61;
/// Bytes before batchLength's coverage: baseOffset and batchLength itself.
const LOG_OVERHEAD: usize = 12;

/// Counts, per thread, the bytes allocated and not yet freed, and their peak, so a test can
/// show a call did not allocate much. Only Rust allocations are seen: zstd's C library
/// allocates with malloc, and its window is bounded (and tested) through `window_log_max`.
struct MeteredAllocator;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // `try_with`: the allocator must never panic, even on a thread that is exiting.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded unchanged to `System`; only counters are added.
unsafe impl GlobalAlloc for MeteredAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // Old and new may both exist while realloc copies: count the new one first.
            count(new_size as isize);
            count(-(layout.size() as isize));
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: MeteredAllocator = MeteredAllocator;

/// Runs `f`; returns its result and the most bytes this thread held at once meanwhile, beyond
/// what it held before.
fn peak_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(start));
    let result = f();
    (result, (PEAK.with(Cell::get) - start) as usize)
}

/// `len` bytes of what records hold: JSON-ish text, runs, counters and noise.
fn mixed_data(len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut data = Vec::with_capacity(len + 512);
    while data.len() < len {
        match next() % 4 {
            0 => data.extend_from_slice(br#"{"user":"alice","action":"login","ok":true}"#),
            1 => data.extend(std::iter::repeat_n(b'x', (next() % 300) as usize)),
            2 => data.extend((0..64u8).map(|i| i.wrapping_mul(7))),
            _ => (0..4).for_each(|_| data.extend_from_slice(&next().to_le_bytes())),
        }
    }
    data.truncate(len);
    data
}

fn decompressed(codec: Compression, input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    decompress(codec, input, limit, &mut out).map(|()| out)
}

/// Where each block of a xerial stream ends (the header's end first).
fn xerial_block_ends(stream: &[u8]) -> Vec<usize> {
    let mut ends = vec![XERIAL_HEADER.len()];
    let mut at = XERIAL_HEADER.len();
    while at < stream.len() {
        let length = u32::from_be_bytes(stream[at..at + 4].try_into().unwrap()) as usize;
        at += 4 + length;
        ends.push(at);
    }
    ends
}

#[test]
fn attributes_name_each_codec_in_bits_0_to_2() {
    for (id, codec) in CODECS.into_iter().enumerate() {
        assert_eq!(codec.attribute_bits(), id as i16);
        // The other bits (timestamp type, transactional, control, ...) do not change it.
        assert_eq!(
            Compression::from_attributes(codec.attribute_bits() | 0x7FF8),
            Ok(codec)
        );
    }
    let names = CODECS.map(Compression::name);
    assert_eq!(names, ["none", "gzip", "snappy", "lz4", "zstd"]);
    assert_eq!(Compression::default(), Compression::None);
    for id in 5..=7 {
        let err = Compression::from_attributes(id | 0x0010).unwrap_err();
        assert!(err.contains(&format!("codec id {id}")), "{err}");
    }
}

#[test]
fn every_codec_round_trips_within_an_exact_limit() {
    let inputs = [Vec::new(), b"hello, kafka".to_vec(), mixed_data(MIB)];
    for codec in CODECS {
        for input in &inputs {
            let compressed = compress(codec, input).unwrap();
            let mut out = vec![0xAA; 10];
            decompress(codec, &compressed, input.len(), &mut out).unwrap();
            assert!(out == *input, "{codec:?}: {} bytes", input.len());
            if let Some(one_less) = input.len().checked_sub(1) {
                let err = decompress(codec, &compressed, one_less, &mut out).unwrap_err();
                assert!(err.contains("exceeds the limit"), "{codec:?}: {err}");
                assert!(out.is_empty(), "{codec:?}: output left after a failure");
            }
        }
        if codec != Compression::None {
            let compressed = compress(codec, &inputs[2]).unwrap();
            assert!(
                compressed.len() < MIB / 2,
                "{codec:?}: {}",
                compressed.len()
            );
        }
    }
}

#[test]
fn compress_writes_the_framing_java_clients_write() {
    let input = mixed_data(100 * KIB);
    let gzip = compress(Compression::Gzip, &input).unwrap();
    assert_eq!(gzip[..3], [0x1F, 0x8B, 8], "gzip magic, deflate");

    let snappy = compress(Compression::Snappy, &input).unwrap();
    assert_eq!(snappy[..16], XERIAL_HEADER);
    let ends = xerial_block_ends(&snappy);
    assert_eq!(ends.len(), 1 + 4, "100 KiB in 32 KiB blocks");
    assert_eq!(*ends.last().unwrap(), snappy.len());
    for pair in ends.windows(2) {
        let block = &snappy[pair[0] + 4..pair[1]];
        assert!(snap::raw::decompress_len(block).unwrap() <= 32 * KIB);
    }

    let lz4 = compress(Compression::Lz4, &input).unwrap();
    // Java's Lz4BlockOutputStream header byte for byte: magic, FLG 0x60, BD 0x40, checksum.
    assert_eq!(lz4[..7], [0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82]);
    assert_eq!(
        lz4[lz4.len() - 4..],
        [0; 4],
        "end mark, no content checksum"
    );

    let zstd = compress(Compression::Zstd, &input).unwrap();
    assert_eq!(zstd[..4], [0x28, 0xB5, 0x2F, 0xFD], "zstd frame magic");
}

#[test]
fn snappy_reads_raw_blocks_and_concatenated_xerial_streams() {
    let input = mixed_data(200 * KIB);
    // librdkafka's layout: the whole section as one raw block.
    let raw = snap::raw::Encoder::new().compress_vec(&input).unwrap();
    assert!(decompressed(Compression::Snappy, &raw, MIB).unwrap() == input);
    let tiny = snap::raw::Encoder::new().compress_vec(b"hi").unwrap();
    assert!(tiny.len() < XERIAL_HEADER.len());
    assert_eq!(
        decompressed(Compression::Snappy, &tiny, MIB).unwrap(),
        b"hi"
    );

    // Two xerial streams back to back read as one, as snappy-java reads them.
    let (first, second) = input.split_at(70_000);
    let mut both = compress(Compression::Snappy, first).unwrap();
    both.extend(compress(Compression::Snappy, second).unwrap());
    assert!(decompressed(Compression::Snappy, &both, MIB).unwrap() == input);
}

#[test]
fn lz4_reads_frames_with_every_flag_combination() {
    let input = mixed_data(150 * KIB);
    let sizes = [BlockSize::Max64KB, BlockSize::Max256KB, BlockSize::Max4MB];
    let mut frames = Vec::new();
    for block_size in sizes {
        for block_mode in [BlockMode::Independent, BlockMode::Linked] {
            for flags in 0..8 {
                let frame = FrameInfo::new()
                    .block_size(block_size)
                    .block_mode(block_mode)
                    .block_checksums(flags & 1 != 0)
                    .content_checksum(flags & 2 != 0)
                    .content_size((flags & 4 != 0).then_some(input.len() as u64));
                let mut encoder = FrameEncoder::with_frame_info(frame, Vec::new());
                encoder.write_all(&input).unwrap();
                let frame = encoder.finish().unwrap();
                let out = decompressed(Compression::Lz4, &frame, MIB).unwrap();
                assert!(
                    out == input,
                    "{block_size:?} {block_mode:?} flags {flags:#b}"
                );
                frames.push(frame);
            }
        }
    }
    // Frames back to back, an empty one among them, decode to their contents back to back.
    let empty = compress(Compression::Lz4, b"").unwrap();
    let back_to_back = [&frames[0], &empty, &frames[1], &empty, &frames[2]].map(Vec::as_slice);
    let out = decompressed(Compression::Lz4, &back_to_back.concat(), 4 * MIB).unwrap();
    assert!(out == input.repeat(3));
}

#[test]
fn lz4_reads_blocks_stored_uncompressed() {
    // Java stores a block that does not shrink as is, with bit 31 of its size set. Here as
    // 1-byte blocks, the smallest there are.
    let input = mixed_data(5000);
    let mut frame = compress(Compression::Lz4, b"").unwrap();
    let end_mark = frame.split_off(LZ4_MIN_HEADER_LEN);
    for &byte in &input {
        frame.extend_from_slice(&(1 | LZ4_BLOCK_UNCOMPRESSED).to_le_bytes());
        frame.push(byte);
    }
    frame.extend_from_slice(&end_mark);
    assert!(decompressed(Compression::Lz4, &frame, MIB).unwrap() == input);
    let err = decompressed(Compression::Lz4, &frame, 4999).unwrap_err();
    assert!(err.contains("exceeds the limit"), "{err}");
}

/// Records with every field kafka-protocol encodes: keys and values present and null,
/// headers, a producer id and epoch, and sequences that keep them in one batch.
fn sample_records() -> Vec<Record> {
    (0..60_i64)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 7,
            producer_id: 4242,
            producer_epoch: 3,
            timestamp_type: TimestampType::Creation,
            offset: 1000 + i,
            sequence: 1000 + i as i32,
            timestamp: 1_700_000_000_000 + i * 13,
            key: (i % 5 != 0).then(|| Bytes::from(format!("key-{}", i % 7))),
            value: (i % 11 != 3).then(|| Bytes::from(mixed_data(i as usize * 97 % 3000))),
            headers: if i % 3 == 0 {
                IndexMap::from([(StrBytes::from_static_str("trace"), Some(Bytes::from("t1")))])
            } else {
                IndexMap::new()
            },
        })
        .collect()
}

fn kafka_protocol_codec(codec: Compression) -> KafkaProtocolCompression {
    match codec {
        Compression::None => KafkaProtocolCompression::None,
        Compression::Gzip => KafkaProtocolCompression::Gzip,
        Compression::Snappy => KafkaProtocolCompression::Snappy,
        Compression::Lz4 => KafkaProtocolCompression::Lz4,
        Compression::Zstd => KafkaProtocolCompression::Zstd,
    }
}

/// One batch of `records` as kafka-protocol encodes it with `codec`.
fn kafka_protocol_batch(records: &[Record], codec: Compression) -> Vec<u8> {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: kafka_protocol_codec(codec),
    };
    RecordBatchEncoder::encode(&mut buf, records, &options).unwrap();
    let batch_length = i32::from_be_bytes(buf[BATCH_LENGTH_AT..][..4].try_into().unwrap());
    assert_eq!(batch_length as usize + LOG_OVERHEAD, buf.len(), "one batch");
    buf.to_vec()
}

#[test]
fn batches_kafka_protocol_compresses_decompress_with_ours() {
    let records = sample_records();
    let plain = kafka_protocol_batch(&records, Compression::None);
    for codec in COMPRESSED {
        let batch = kafka_protocol_batch(&records, codec);
        let attributes = i16::from_be_bytes([batch[ATTRIBUTES_AT], batch[ATTRIBUTES_AT + 1]]);
        assert_eq!(Compression::from_attributes(attributes), Ok(codec));
        let section = &batch[RECORDS_AT..];
        if codec == Compression::Lz4 {
            // The C liblz4 frame: independent blocks, block and content checksums (both
            // verified by our reader), where Java writes neither checksum.
            assert_eq!(section[4], 0x74, "FLG");
        }
        let out = decompressed(codec, section, MIB).unwrap();
        assert!(out == plain[RECORDS_AT..], "{codec:?}");
    }
}

#[test]
fn batches_compressed_with_ours_decode_with_kafka_protocol() {
    let records = sample_records();
    let plain = kafka_protocol_batch(&records, Compression::None);
    for codec in COMPRESSED {
        let mut batch = plain[..RECORDS_AT].to_vec();
        batch.extend(compress(codec, &plain[RECORDS_AT..]).unwrap());
        let attributes = i16::from_be_bytes([batch[ATTRIBUTES_AT], batch[ATTRIBUTES_AT + 1]]);
        let attributes = attributes & !CODEC_MASK | codec.attribute_bits();
        batch[ATTRIBUTES_AT..][..2].copy_from_slice(&attributes.to_be_bytes());
        let batch_length = (batch.len() - LOG_OVERHEAD) as i32;
        batch[BATCH_LENGTH_AT..][..4].copy_from_slice(&batch_length.to_be_bytes());
        let crc = crc32c::crc32c(&batch[ATTRIBUTES_AT..]);
        batch[CRC_AT..][..4].copy_from_slice(&crc.to_be_bytes());

        let mut buf = Bytes::from(batch);
        let set = RecordBatchDecoder::decode(&mut buf).unwrap();
        assert!(buf.is_empty(), "{codec:?}: bytes left after the batch");
        assert_eq!(set.compression, kafka_protocol_codec(codec));
        assert!(set.records == records, "{codec:?}: records differ");
    }
}

/// `copies` gzip members of 1 MiB of zeros back to back (about 1 KiB each).
fn gzip_bomb(copies: usize) -> Vec<u8> {
    compress(Compression::Gzip, &vec![0; MIB])
        .unwrap()
        .repeat(copies)
}

/// A xerial stream of `copies` blocks of 32 KiB of zeros. Snappy expands at most about 21
/// times, so a 1 GiB bomb takes 48 MiB: the densest there is.
fn snappy_bomb(copies: usize) -> Vec<u8> {
    let one = compress(Compression::Snappy, &vec![0; XERIAL_BLOCK_SIZE]).unwrap();
    [
        &XERIAL_HEADER[..],
        &one[XERIAL_HEADER.len()..].repeat(copies),
    ]
    .concat()
}

/// One LZ4 frame of `copies` independent 64 KiB blocks of zeros (about 270 bytes each).
fn lz4_bomb(copies: usize) -> Vec<u8> {
    let two = compress(Compression::Lz4, &vec![0; 128 * KIB]).unwrap();
    let (header, blocks) = (
        &two[..LZ4_MIN_HEADER_LEN],
        &two[LZ4_MIN_HEADER_LEN..two.len() - 4],
    );
    let (block, again) = blocks.split_at(blocks.len() / 2);
    assert_eq!(block, again, "independent blocks of zeros compress alike");
    [header, &block.repeat(copies), &[0; 4]].concat()
}

/// `copies` zstd frames of 1 MiB of zeros back to back (each declares its 1 MiB size).
fn zstd_bomb(copies: usize) -> Vec<u8> {
    compress(Compression::Zstd, &vec![0; MIB])
        .unwrap()
        .repeat(copies)
}

/// A zstd frame header with no content size and a window of 2^`window_log` bytes.
fn zstd_frame_header(window_log: u8) -> Vec<u8> {
    // Frame header descriptor 0: no content size, not single-segment, no checksum or dict.
    // Window descriptor: exponent (window_log - 10) in bits 3-7, mantissa 0.
    vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, (window_log - 10) << 3]
}

/// Appends a zstd RLE block: `len` copies of one zero byte.
fn push_zstd_rle_block(frame: &mut Vec<u8>, len: u32, last: bool) {
    let header = len << 3 | 1 << 1 | u32::from(last);
    frame.extend_from_slice(&header.to_le_bytes()[..3]);
    frame.push(0);
}

/// One zstd frame of `copies` RLE blocks of 128 KiB under a 1 MiB window, with no content
/// size: a single frame expanding 32 768 times.
fn zstd_rle_bomb(copies: usize) -> Vec<u8> {
    let mut frame = zstd_frame_header(20);
    for i in 0..copies {
        push_zstd_rle_block(&mut frame, 128 * KIB as u32, i + 1 == copies);
    }
    frame
}

#[test]
fn bombs_fail_at_the_limit_without_allocating_their_expansion() {
    type Bomb = (Compression, fn(usize) -> Vec<u8>, usize);
    let bombs: [Bomb; 5] = [
        (Compression::Gzip, gzip_bomb, MIB),
        (Compression::Snappy, snappy_bomb, XERIAL_BLOCK_SIZE),
        (Compression::Lz4, lz4_bomb, 64 * KIB),
        (Compression::Zstd, zstd_bomb, MIB),
        (Compression::Zstd, zstd_rle_bomb, 128 * KIB),
    ];
    for (codec, bomb, unit) in bombs {
        // Each bomb is a valid stream: a small one decodes in full.
        let out = decompressed(codec, &bomb(3), 3 * unit).unwrap();
        assert!(
            out.len() == 3 * unit && out.iter().all(|&b| b == 0),
            "{codec:?}"
        );

        let input = bomb(GIB / unit);
        let (result, peak) = peak_allocation(|| decompressed(codec, &input, MIB));
        let err = result.unwrap_err();
        assert!(
            err.contains("exceeds the limit of 1048576 bytes"),
            "{codec:?}: {err}"
        );
        assert!(
            peak < 2 * MIB,
            "{codec:?}: {peak} bytes allocated for a 1 GiB bomb"
        );
    }
}

/// A raw snappy block that declares `declared` bytes and holds a 3-byte literal.
fn snappy_block_declaring(declared: u32) -> Vec<u8> {
    let mut block = Vec::new();
    let mut rest = declared;
    while rest >= 0x80 {
        block.push(rest as u8 | 0x80);
        rest >>= 7;
    }
    block.push(rest as u8);
    block.extend_from_slice(&[2 << 2, b'a', b'b', b'c']);
    block
}

#[test]
fn declared_lengths_are_not_trusted() {
    // Raw snappy declaring 4 GiB - 1 (the most its varint allows) in 9 bytes.
    let raw = snappy_block_declaring(u32::MAX);
    let (result, peak) = peak_allocation(|| decompressed(Compression::Snappy, &raw, MIB));
    assert!(result.unwrap_err().contains("exceeds the limit"));
    assert!(
        peak < 4 * KIB,
        "{peak} bytes allocated for a declared 4 GiB"
    );
    // The same lie inside xerial framing, after a valid block.
    let block = snappy_block_declaring(GIB as u32);
    let mut xerial = compress(Compression::Snappy, b"first").unwrap();
    xerial.extend_from_slice(&(block.len() as u32).to_be_bytes());
    xerial.extend_from_slice(&block);
    let (result, peak) = peak_allocation(|| decompressed(Compression::Snappy, &xerial, MIB));
    assert!(result.unwrap_err().contains("exceeds the limit"));
    assert!(
        peak < 4 * KIB,
        "{peak} bytes allocated for a declared 1 GiB"
    );
    // Declaring less than the limit but holding less than declared: invalid.
    let short = snappy_block_declaring(1000);
    assert!(decompressed(Compression::Snappy, &short, MIB).is_err());
    // A xerial block length running past the input.
    let mut past = compress(Compression::Snappy, b"first").unwrap();
    past.extend_from_slice(&u32::MAX.to_be_bytes());
    assert!(decompressed(Compression::Snappy, &past, MIB).is_err());

    // An LZ4 frame whose content size claims 1 TiB.
    let frame = FrameInfo::new().content_size(Some(1 << 40));
    let mut encoder = FrameEncoder::with_frame_info(frame, Vec::new());
    encoder.write_all(&mixed_data(1000)).unwrap();
    assert!(
        encoder.try_finish().is_err(),
        "lz4_flex refuses to end a lying frame"
    );
    let lying = [&encoder.into_inner()[..], &[0; 4]].concat();
    let (result, peak) = peak_allocation(|| decompressed(Compression::Lz4, &lying, MIB));
    assert!(result.is_err());
    assert!(
        peak < 512 * KIB,
        "{peak} bytes allocated for a declared 1 TiB"
    );

    // A gzip trailer whose length (ISIZE) lies.
    let mut gzip = compress(Compression::Gzip, &mixed_data(1000)).unwrap();
    let len = gzip.len();
    gzip[len - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decompressed(Compression::Gzip, &gzip, MIB).is_err());

    // A single-segment zstd frame whose content size (and so window) claims 1 TiB.
    let mut huge = vec![0x28, 0xB5, 0x2F, 0xFD, 0xE0];
    huge.extend_from_slice(&(1_u64 << 40).to_le_bytes());
    push_zstd_rle_block(&mut huge, 10, true);
    let err = decompressed(Compression::Zstd, &huge, MIB).unwrap_err();
    assert!(err.contains("too much memory"), "{err}");
    // A single-segment frame declaring 10 bytes, whose block holds more.
    let mut small = vec![0x28, 0xB5, 0x2F, 0xFD, 0x20, 10];
    push_zstd_rle_block(&mut small, 1000, true);
    assert!(decompressed(Compression::Zstd, &small, MIB).is_err());
}

#[test]
fn zstd_window_is_capped_at_the_larger_of_8_mib_and_the_limit() {
    let frame = |window_log| {
        let mut frame = zstd_frame_header(window_log);
        push_zstd_rle_block(&mut frame, 10, true);
        frame
    };
    assert_eq!(
        decompressed(Compression::Zstd, &frame(23), MIB).unwrap(),
        [0; 10]
    );
    for (window_log, limit) in [(24, MIB), (24, 16 * MIB - 1), (31, GIB)] {
        let err = decompressed(Compression::Zstd, &frame(window_log), limit).unwrap_err();
        assert!(
            err.contains("too much memory"),
            "2^{window_log} under {limit}: {err}"
        );
    }
    assert_eq!(
        decompressed(Compression::Zstd, &frame(24), 16 * MIB).unwrap(),
        [0; 10]
    );
    assert_eq!(zstd_window_log_max(0), ZSTD_WINDOW_LOG_FLOOR);
    assert_eq!(zstd_window_log_max(usize::MAX), ZSTD_WINDOW_LOG_CEILING);
}

#[test]
fn garbage_is_an_error_for_every_codec() {
    let mut noise = mixed_data(8 * KIB);
    noise.retain(|&b| b != b'x');
    let garbage = [
        vec![0; 100],
        vec![0xFF; 100],
        b"not compressed at all".to_vec(),
        noise,
        Vec::new(),
    ];
    for codec in COMPRESSED {
        for input in &garbage {
            let err = decompressed(codec, input, MIB).unwrap_err();
            assert!(err.contains(codec.name()), "{err}");
        }
    }
}

#[test]
fn truncated_streams_are_errors() {
    let input = mixed_data(100 * KIB);
    for codec in COMPRESSED {
        let full = compress(codec, &input).unwrap();
        let step = (full.len() / 500).max(1);
        let cuts = (0..full.len())
            .step_by(step)
            .chain(full.len() - 20..full.len());
        // Xerial framing has no end marker: a whole number of blocks is a shorter stream.
        let block_ends = match codec {
            Compression::Snappy => xerial_block_ends(&full),
            _ => Vec::new(),
        };
        for cut in cuts.filter(|cut| !block_ends.contains(cut)) {
            let result = decompressed(codec, &full[..cut], MIB);
            assert!(result.is_err(), "{codec:?} cut at {cut} of {}", full.len());
        }
    }
    // Raw snappy (librdkafka's layout) has its length up front: every cut is an error.
    let raw = snap::raw::Encoder::new().compress_vec(&input).unwrap();
    for cut in (0..raw.len()).step_by(97) {
        assert!(decompressed(Compression::Snappy, &raw[..cut], MIB).is_err());
    }
    // The xerial exception, pinned: a cut after the second block yields two blocks' worth.
    let full = compress(Compression::Snappy, &input).unwrap();
    let cut = xerial_block_ends(&full)[2];
    let out = decompressed(Compression::Snappy, &full[..cut], MIB).unwrap();
    assert!(out == input[..2 * XERIAL_BLOCK_SIZE]);
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in vec(any::<u8>(), 0..2048),
        magic in 0usize..5,
        limit in 0usize..100_000,
    ) {
        // Also behind each codec's magic, so the decoders get past their first check.
        let magics: [&[u8]; 5] = [
            b"",
            b"\x1F\x8B\x08\x00",
            &XERIAL_HEADER,
            b"\x04\x22\x4D\x18\x60\x40\x82",
            b"\x28\xB5\x2F\xFD",
        ];
        let input = [magics[magic], &bytes].concat();
        for codec in CODECS {
            let mut out = Vec::new();
            match decompress(codec, &input, limit, &mut out) {
                Ok(()) => prop_assert!(out.len() <= limit),
                Err(_) => prop_assert!(out.is_empty()),
            }
        }
    }

    #[test]
    fn corrupted_streams_never_panic(
        data in vec(0u8..4, 1..4096),
        flips in vec((any::<prop::sample::Index>(), 1u8..), 1..4),
        codec in 0usize..5,
    ) {
        let codec = CODECS[codec];
        let mut stream = compress(codec, &data).unwrap();
        for (at, mask) in flips {
            let at = at.index(stream.len());
            stream[at] ^= mask;
        }
        let mut out = Vec::new();
        if decompress(codec, &stream, 8 * KIB, &mut out).is_ok() {
            prop_assert!(out.len() <= 8 * KIB);
        }
    }
}

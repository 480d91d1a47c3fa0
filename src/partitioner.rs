//! Kafka's default partitioner for keyed records, bit for bit: the Java client's
//! `Utils.murmur2` (seed `0x9747b28c`) and `toPositive(hash) % partitions`, so a key lands on
//! the same partition number here as in Apache Kafka with the same partition count.

/// Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`), as a signed 32-bit value.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len();
    let mut h: u32 = SEED ^ (length as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a keyed record: `toPositive(murmur2(key)) % partitions`.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    let positive = (murmur2(key) & 0x7fff_ffff) as u32;
    positive % partitions
}

/// The partition of each record of a batch: by key (`partition_for_key`) or, keyless,
/// the next one `next_keyless` deals (round-robin). Lazy: one `next_keyless` call per keyless
/// record, as the partitions are taken.
pub fn assign<K: AsRef<[u8]>>(
    keys: impl IntoIterator<Item = Option<K>>,
    partitions: u32,
    mut next_keyless: impl FnMut() -> u32,
) -> impl Iterator<Item = u32> {
    keys.into_iter().map(move |key| match key {
        Some(key) => partition_for_key(key.as_ref(), partitions),
        None => next_keyless() % partitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_kafkas_test_vectors() {
        // Kafka's own test vectors (UtilsTest).
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"abc"), 479_470_107);
        // Remaining vectors of Kafka's UtilsTest.testMurmur2 cover every tail length.
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58_897_971
        );
        assert_eq!(murmur2(b""), 275_646_681);
    }

    #[test]
    fn keyless_records_take_turns_and_keyed_ones_follow_their_key() {
        let mut next = 0;
        let keys = [None, Some(&b"21"[..]), None, None];
        let assigned: Vec<u32> = assign(keys, 3, || {
            next += 1;
            next - 1
        })
        .collect();
        assert_eq!(assigned, vec![0, partition_for_key(b"21", 3), 1, 2]);
    }

    #[test]
    fn partition_is_to_positive_mod_count() {
        // murmur2("21") is negative: toPositive keeps the low 31 bits.
        let expected = ((-973_932_308i32 & 0x7fff_ffff) as u32) % 7;
        assert_eq!(partition_for_key(b"21", 7), expected);
        for key in [&b"user1"[..], b"", b"abc"] {
            assert!(partition_for_key(key, 3) < 3);
            assert_eq!(partition_for_key(key, 1), 0);
        }
    }
}

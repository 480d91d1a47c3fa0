//! The batch format against itself: sealed batches decode to their records, every byte under
//! the CRC is checked, cuts are incomplete, varints round-trip at their edges.

use super::*;

fn native_batch(base_offset: u64, records: &[(Option<&[u8]>, &[u8])]) -> Vec<u8> {
    let mut buf = vec![0u8; HEADER_LEN];
    for (i, (key, value)) in records.iter().enumerate() {
        encode_record(&mut buf, i as u32, *key, Some(value), &[(b"h", None)]);
    }
    seal_native(
        &mut buf,
        NativeSeal {
            base_offset,
            records_count: records.len() as u32,
            timestamp_ms: 1_700_000_000_000,
            timestamp_type: TimestampType::CreateTime,
        },
    );
    buf
}

#[test]
fn a_sealed_native_batch_decodes_with_its_records() {
    let batch = native_batch(
        40,
        &[(None, b"first"), (Some(b""), b""), (Some(b"k"), b"v3")],
    );
    let Decoded::Batch(header) = decode(&batch) else {
        panic!("{:?}", decode(&batch))
    };
    assert_eq!((header.base_offset, header.last_offset()), (40, 42));
    assert_eq!(header.batch_len, batch.len());
    assert_eq!(header.max_timestamp, 1_700_000_000_000);
    let mut scratch = Vec::new();
    let section = records_section(&batch, &header, 1 << 20, &mut scratch).unwrap();
    let mut seen = Vec::new();
    validate_records(section, &header, |r| {
        seen.push((r.key, r.value, r.headers.iter().collect::<Vec<_>>()))
    })
    .unwrap();
    assert_eq!(seen[0].0, None);
    assert_eq!(
        seen[1],
        (Some(&b""[..]), Some(&b""[..]), vec![(&b"h"[..], None)])
    );
    assert_eq!(seen[2].1, Some(&b"v3"[..]));
}

#[test]
fn a_client_batch_keeps_each_records_timestamp_nulls_and_repeated_headers() {
    let headers: [(&[u8], Option<&[u8]>); 3] =
        [(b"k", Some(b"1")), (b"k", None), (b"other", Some(b""))];
    let records = [
        ClientRecord {
            timestamp_ms: 1_700_000_000_500,
            key: None,
            value: None,
            headers: &headers,
        },
        ClientRecord {
            timestamp_ms: 1_700_000_000_000, // earlier than the first: a negative delta
            key: Some(b""),
            value: Some(b""),
            headers: &[],
        },
        ClientRecord {
            timestamp_ms: 1_700_000_009_000,
            key: Some(b"key"),
            value: Some(b"value"),
            headers: &headers[..1],
        },
    ];
    let batch = encode_client_batch(&records);
    let Decoded::Batch(header) = decode(&batch) else {
        panic!("{:?}", decode(&batch))
    };
    assert_eq!((header.base_offset, header.records_count), (0, 3));
    assert_eq!(header.timestamp_type(), TimestampType::CreateTime);
    assert_eq!(header.max_timestamp, 1_700_000_009_000);
    assert_eq!(header.producer_id, NO_PRODUCER_ID);
    let mut scratch = Vec::new();
    let section = records_section(&batch, &header, 1 << 20, &mut scratch).unwrap();
    let mut seen = Vec::new();
    validate_records(section, &header, |r| {
        seen.push(ClientRecord {
            timestamp_ms: header.record_timestamp(r.timestamp_delta),
            key: r.key,
            value: r.value,
            headers: &[],
        });
        assert_eq!(
            r.headers.iter().collect::<Vec<_>>(),
            records[seen.len() - 1].headers.to_vec()
        );
    })
    .unwrap();
    let fields = |r: &ClientRecord<'_>| {
        (
            r.timestamp_ms,
            r.key.map(<[u8]>::to_vec),
            r.value.map(<[u8]>::to_vec),
        )
    };
    assert_eq!(
        seen.iter().map(fields).collect::<Vec<_>>(),
        records.iter().map(fields).collect::<Vec<_>>()
    );
}

#[test]
fn every_flipped_byte_under_the_crc_is_detected() {
    let batch = native_batch(7, &[(Some(b"k"), b"some value bytes")]);
    for i in CRC_START..batch.len() {
        let mut bad = batch.clone();
        bad[i] ^= 0x40;
        assert!(
            !matches!(decode(&bad), Decoded::Batch(_)),
            "flip at byte {i} went unnoticed"
        );
    }
}

#[test]
fn a_cut_batch_is_incomplete_and_zeros_are_invalid() {
    let batch = native_batch(1, &[(None, b"abcdef")]);
    for cut in 0..batch.len() {
        assert!(
            matches!(decode(&batch[..cut]), Decoded::Incomplete { .. }),
            "cut at {cut}"
        );
    }
    assert!(matches!(decode(&[0u8; 64]), Decoded::Invalid { .. }));
}

#[test]
fn varints_round_trip_at_their_edges() {
    for v in [
        0i64,
        1,
        -1,
        63,
        -64,
        64,
        -65,
        8191,
        -8192,
        8192,
        -8193,
        i32::MAX as i64,
        i32::MIN as i64,
    ] {
        let mut buf = Vec::new();
        put_varint(&mut buf, v);
        assert_eq!(buf.len(), varint_len(v));
        assert_eq!(Cursor::new(&buf).varint(), Ok(v));
    }
    for v in [i64::MAX, i64::MIN] {
        let mut buf = Vec::new();
        put_varint(&mut buf, v);
        assert_eq!(buf.len(), varint_len(v));
    }
    let mut long = Vec::new();
    put_varint(&mut long, i64::MIN);
    assert_eq!(Cursor::new(&long).varlong(), Ok(i64::MIN));
    assert!(Cursor::new(&long).varint().is_err());
    assert!(Cursor::new(&[0x80; 11]).varlong().is_err());
}

#[test]
fn record_len_is_what_encode_record_writes() {
    let headers: [(&[u8], Option<&[u8]>); 2] = [(b"trace", Some(b"abc")), (b"n", None)];
    let cases = [
        (0u32, None, Some(0usize)),
        (300, Some(&b"key"[..]), Some(200)),
        (7, Some(&b"gone"[..]), None),
    ];
    for (delta, key, value_len) in cases {
        let value = value_len.map(|n| vec![7; n]);
        let mut buf = Vec::new();
        encode_record(&mut buf, delta, key, value.as_deref(), &headers);
        assert_eq!(buf.len(), record_len(delta, key, value_len, &headers));
        let record = parse_record(&buf).unwrap();
        assert_eq!((record.offset_delta, record.key), (delta, key));
        assert_eq!(record.value, value.as_deref());
        assert_eq!(record.headers.iter().collect::<Vec<_>>(), headers);
        assert_eq!(record.encoded_len, buf.len());
    }
}

#[test]
fn garbage_records_are_errors_not_panics() {
    for bad in [
        &[][..],
        &[2, 0],
        &[0x7f, 0, 0, 0],
        &[10, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0],
    ] {
        assert!(parse_record(bad).is_err(), "{bad:?}");
    }
}

/// The steps `walk_batches` takes over `bytes` ("offset=value" per record, "end N" per batch
/// ending), stopping after `stop_after` of them.
fn walked(bytes: &[u8], stop_after: usize) -> (Vec<String>, Result<(), WalkError>) {
    let (mut steps, mut scratch) = (Vec::new(), Vec::new());
    let result = walk_batches(bytes, &mut scratch, |step| {
        steps.push(match step {
            BatchStep::Record(h, r) => format!(
                "{}={}",
                h.base_offset + u64::from(r.offset_delta),
                String::from_utf8_lossy(r.value.unwrap_or_default())
            ),
            BatchStep::End(h) => format!("end {}", h.base_offset),
        });
        steps.len() < stop_after
    });
    (steps, result)
}

#[test]
fn walk_batches_visits_records_and_batch_ends_in_order_and_leaves_a_cut_tail() {
    let mut bytes = native_batch(10, &[(None, b"a"), (Some(b"k"), b"b")]);
    bytes.extend(native_batch(12, &[(None, b"c")]));
    let whole = bytes.len();
    // A third batch cut short, as the end of a fetch can be: left for the next read.
    let cut = native_batch(13, &[(None, b"d")]);
    bytes.extend(&cut[..cut.len() - 1]);
    let (steps, result) = walked(&bytes, usize::MAX);
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(steps, ["10=a", "11=b", "end 10", "12=c", "end 12"]);

    // `visit` answering false stops the walk after that step, inside a batch too.
    let (steps, result) = walked(&bytes[..whole], 2);
    assert!(result.is_ok());
    assert_eq!(steps, ["10=a", "11=b"]);
}

#[test]
fn walk_batches_names_the_damaged_batch_after_visiting_the_ones_before() {
    let mut bytes = native_batch(10, &[(None, b"a")]);
    let mut second = native_batch(11, &[(None, b"b")]);
    let last = second.len() - 1;
    second[last] ^= 0xff; // under the CRC
    bytes.extend(&second);
    let (steps, result) = walked(&bytes, usize::MAX);
    assert_eq!(steps, ["10=a", "end 10"]);
    let error = result.expect_err("the second batch does not verify");
    assert_eq!(error.base_offset, None, "its header (CRC) did not verify");
    assert!(
        error.reason.to_lowercase().contains("crc"),
        "{}",
        error.reason
    );
}

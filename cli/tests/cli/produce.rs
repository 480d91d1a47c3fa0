//! `nanokafka produce`: stdin lines as records, read back with the embedded broker.

use nanokafka::{Consumer, NanoKafka};

use crate::{
    assert_refused_while_locked, fails, fixture, json, ok, records, run_with_stdin, snapshot,
    usage_error,
};

/// A fixture with an empty 3-partition topic `in`.
fn with_empty_topic() -> tempfile::TempDir {
    let dir = fixture();
    let broker = NanoKafka::builder().data_dir(dir.path()).build().unwrap();
    broker
        .create_topic("in", nanokafka::TopicConfig::default().partitions(3))
        .unwrap();
    broker.shutdown().unwrap();
    dir
}

#[test]
fn each_line_is_one_raw_record_with_the_headers() {
    let dir = with_empty_topic();
    let input = b"first\nsecond line\r\n\nnot utf-8 \xff\nlast";
    let text = ok(&run_with_stdin(
        dir.path(),
        &[
            "produce",
            "in",
            "--partition",
            "1",
            "--header",
            "source=cli",
            "--header",
            "eq=a=b",
        ],
        input,
    ));
    assert_eq!(text.trim(), "produced 5 records to in");
    let stored = records(dir.path(), "in");
    let values: Vec<&[u8]> = stored
        .iter()
        .map(|(_, r)| r.value.as_deref().unwrap())
        .collect();
    assert_eq!(
        values,
        [
            &b"first"[..],
            b"second line",
            b"",
            b"not utf-8 \xff",
            b"last"
        ]
    );
    for (partition, record) in &stored {
        assert_eq!(*partition, 1);
        assert_eq!(record.key, None);
        let headers: Vec<(&[u8], Option<&[u8]>)> = record
            .headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        assert_eq!(
            headers,
            [(&b"source"[..], Some(&b"cli"[..])), (b"eq", Some(b"a=b"))]
        );
    }
    let offsets: Vec<u64> = stored.iter().map(|(_, r)| r.offset).collect();
    assert_eq!(offsets, [0, 1, 2, 3, 4]);
}

#[test]
fn a_key_separator_splits_keys_that_pick_the_partition() {
    let dir = with_empty_topic();
    let doc = json(&run_with_stdin(
        dir.path(),
        &["produce", "in", "--key-separator", "::", "--json"],
        b"a::1\nb::2::x\na::3\n",
    ));
    assert_eq!(doc["topic"], "in");
    assert_eq!(doc["records"], 3);
    let deliveries = doc["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 3);
    // Records of one key land in one partition, in order.
    assert_eq!(deliveries[0]["partition"], deliveries[2]["partition"]);
    let stored = records(dir.path(), "in");
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = stored
        .iter()
        .map(|(_, r)| (r.key.clone().unwrap(), r.value.clone().unwrap()))
        .collect();
    pairs.sort();
    assert_eq!(
        pairs,
        [
            (b"a".to_vec(), b"1".to_vec()),
            (b"a".to_vec(), b"3".to_vec()),
            (b"b".to_vec(), b"2::x".to_vec()),
        ]
    );
    for (delivery, key) in deliveries.iter().zip(["a", "b", "a"]) {
        let partition = delivery["partition"].as_u64().unwrap() as u32;
        assert_eq!(partition, nanokafka::partition_for_key(key.as_bytes(), 3));
        let offset = delivery["offset"].as_u64().unwrap();
        let (_, record) = stored
            .iter()
            .find(|(p, r)| *p == partition && r.offset == offset)
            .expect("the delivery's record");
        assert_eq!(record.key.as_deref(), Some(key.as_bytes()));
    }
}

#[test]
fn msgpack_json_values_read_as_typed_records() {
    let dir = with_empty_topic();
    ok(&run_with_stdin(
        dir.path(),
        &["produce", "in", "--msgpack-json", "--partition", "0"],
        b"{\"id\": 1, \"tags\": [\"a\"]}\n42\n\"text\"\n",
    ));
    let broker = NanoKafka::builder().data_dir(dir.path()).build().unwrap();
    let mut consumer: Consumer<serde_json::Value> = broker.consumer("in", "typed", "m").unwrap();
    let mut values = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while values.len() < 3 && std::time::Instant::now() < deadline {
        let batch = consumer
            .poll_batch(10, std::time::Duration::from_millis(200))
            .unwrap();
        values.extend(batch.into_iter().map(|record| record.value));
    }
    drop(consumer);
    broker.shutdown().unwrap();
    assert_eq!(
        values,
        [
            serde_json::json!({ "id": 1, "tags": ["a"] }),
            serde_json::json!(42),
            serde_json::json!("text"),
        ]
    );
    // `consume` shows them as JSON again.
    let out = ok(&crate::run_on(dir.path(), &["consume", "in", "--json"]));
    let first: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(first["value_format"], "msgpack");
    assert_eq!(first["value"]["tags"][0], "a");
}

#[test]
fn a_bad_line_fails_and_writes_nothing() {
    let dir = with_empty_topic();
    let before = snapshot(dir.path());
    let message = fails(&run_with_stdin(
        dir.path(),
        &["produce", "in", "--key-separator", ":"],
        b"k:v\nno separator\n",
    ));
    assert!(message.contains("line 2"), "{message}");
    assert!(message.contains("no key separator ':'"), "{message}");
    let message = fails(&run_with_stdin(
        dir.path(),
        &["produce", "in", "--msgpack-json"],
        b"{}\n{not json\n",
    ));
    assert!(
        message.contains("line 2: the value is not JSON"),
        "{message}"
    );
    assert_eq!(snapshot(dir.path()), before);
    assert!(records(dir.path(), "in").is_empty());
}

#[test]
fn unknown_topic_or_partition_fails_and_bad_flags_are_usage_errors() {
    let dir = with_empty_topic();
    let before = snapshot(dir.path());
    let message = fails(&run_with_stdin(dir.path(), &["produce", "nope"], b"x\n"));
    assert!(message.contains("no topic 'nope'"), "{message}");
    assert!(message.contains("it has: events, in, orders"), "{message}");
    let message = fails(&run_with_stdin(
        dir.path(),
        &["produce", "in", "--partition", "3"],
        b"x\n",
    ));
    assert!(message.contains("no partition 3"), "{message}");
    for args in [
        &["produce", "in", "--header", "novalue"][..],
        &["produce", "in", "--header", "=v"],
        &["produce", "in", "--partition", "-1"],
        &["produce", "in", "--key-separator", ""],
        &["produce"],
    ] {
        usage_error(&run_with_stdin(dir.path(), args, b"x\n"));
    }
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn many_lines_go_in_several_batches_in_order() {
    let dir = with_empty_topic();
    let input: String = (0..2500).map(|i| format!("{i}\n")).collect();
    let doc = json(&run_with_stdin(
        dir.path(),
        &["produce", "in", "--partition", "2", "--json"],
        input.as_bytes(),
    ));
    assert_eq!(doc["records"], 2500);
    let stored = records(dir.path(), "in");
    assert_eq!(stored.len(), 2500);
    for (i, (_, record)) in stored.iter().enumerate() {
        assert_eq!(record.offset, i as u64);
        assert_eq!(record.value.as_deref(), Some(i.to_string().as_bytes()));
    }
}

#[test]
fn a_locked_data_directory_is_refused_at_once() {
    let dir = with_empty_topic();
    // No stdin: the refusal does not wait for input (the test's stdin is empty anyway).
    assert_refused_while_locked(dir.path(), &["produce", "in"]);
}

//! `Table<K, V>` on every backend: restored from what the topic held at open (tombstones
//! applied), read-your-writes for `put` and `delete`, and a table of another client that
//! catches up with both.

use std::collections::BTreeMap;

use actix::System;
use nanokafka::Table;

use crate::target::{on_every_target, Target};

fn a_table_is_restored_at_open_and_follows_every_writer(t: &Target) {
    let topic = t.new_topic("table", 2);
    for round in 0..3u64 {
        for key in ["a", "b", "c"] {
            t.broker().produce_keyed(&topic, key, &round).unwrap();
        }
    }
    t.broker().produce_tombstone(&topic, b"b").unwrap();
    let ours = t.broker().async_handle();
    let other = t.another_client();
    let theirs = other.async_handle();
    System::new().block_on(async move {
        let table: Table<String, u64> = ours.topic(&topic).table().await.unwrap();
        let expected = BTreeMap::from([("a".to_owned(), 2), ("c".to_owned(), 2)]);
        assert_eq!(table.to_map(), expected);

        table.put("d".to_owned(), &9).await.unwrap();
        assert_eq!(table.get(&"d".to_owned()), Some(9));
        table.delete(&"a".to_owned()).await.unwrap();
        assert_eq!(table.get(&"a".to_owned()), None);

        let elsewhere: Table<String, u64> = theirs.topic(&topic).table().await.unwrap();
        let expected = BTreeMap::from([("c".to_owned(), 2), ("d".to_owned(), 9)]);
        assert_eq!(elsewhere.to_map(), expected);
        elsewhere.put("c".to_owned(), &3).await.unwrap();
        table.catch_up().await.unwrap();
        assert_eq!(table.get(&"c".to_owned()), Some(3));
    });
}

on_every_target!(a_table_is_restored_at_open_and_follows_every_writer);

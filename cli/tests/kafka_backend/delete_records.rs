//! `delete_records` on every backend: the low watermark moves to the offset asked for, and
//! a group without a commit reads from it.

use crate::target::{on_every_target, Target};

fn deleting_records_moves_where_a_new_group_starts(t: &Target) {
    if t.is_tansu() {
        // tansu 0.6.0 has no DeleteRecords: its broker task panics ("not yet implemented")
        // and the request fails with a transport error.
        return;
    }
    let topic = t.new_topic("trim", 1);
    for i in 0..6u64 {
        t.broker().produce(&topic, &i).unwrap();
    }
    assert_eq!(t.broker().delete_records(&topic, 0, 4).unwrap(), 4);
    let mut consumer = t.broker().consumer::<u64>(&topic, "fresh", "m").unwrap();
    let first = crate::wait::read(&mut consumer, 1).remove(0);
    assert_eq!((first.offset, first.value), (4, 4));
}

on_every_target!(deleting_records_moves_where_a_new_group_starts);

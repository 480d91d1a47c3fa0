//! Requests built to hurt the broker rather than to be served.

use crate::client::WireClient;
use crate::common::listening_broker;

#[test]
fn a_request_declaring_more_elements_than_its_frame_holds_closes_only_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let mut bystander = WireClient::connect(addr);
    // Metadata v0 and v12 whose topics array claims about 2^31 and 2^32 entries: decoded
    // unchecked, each would make the process reserve hundreds of GB and abort.
    let v0 = [0, 3, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff];
    let v12 = [
        0, 3, 0, 12, 0, 0, 0, 2, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0xff, 0x0f,
    ];
    for frame in [&v0[..], &v12[..]] {
        let mut client = WireClient::connect(addr);
        client.send_raw(frame);
        assert!(client.closed_by_broker());
    }
    let response = bystander.call(&kafka_protocol::messages::MetadataRequest::default(), 12);
    assert!(
        response.topics.is_empty(),
        "the process and its other connections live on"
    );
    let stats = broker.stats().unwrap().listener.expect("listener stats");
    assert_eq!(stats.connections_closed_bad_request, 2);
}

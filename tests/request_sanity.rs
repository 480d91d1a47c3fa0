//! The listener's check of a request's shape before decoding (`src/listener/sanity.rs`),
//! against kafka-protocol itself, and the request path fuzzed under proptest (the CI fallback
//! of the `request_decode` cargo-fuzz target).
//!
//! * Requests laid out at random by the walk's own schemas (every API and version it knows,
//!   tagged fields known and unknown, nulls) must decode with kafka-protocol to their last
//!   byte: so the schemas read what the decoder reads. kafka-protocol's encoding of what it
//!   decoded must then pass the walk to its last byte: so no valid request is refused.
//! * Every array count of such requests, made huge, is refused at its own offset.
//! * Arbitrary frames and valid frames damaged at random never panic, and never make the
//!   decoder allocate more than a small multiple of the frame: this binary's allocator records
//!   the largest allocation of the thread.

#[path = "../fuzz/src/request.rs"]
mod fuzz_request;
#[path = "common/tls.rs"]
mod tls_certs;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, RequestHeader, RequestKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use nanokafka::internals::listener::sanity::{self, Field, SanityError, Schema, Ty};
use nanokafka::internals::listener::{read_request, SERVED};
use proptest::prelude::*;

// ---- an allocator that records the largest allocation of the current thread ----

struct Recording;

thread_local! {
    // Const-initialised and without a destructor: reading it never allocates.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

fn record(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
    let _ = COUNT.try_with(|c| c.set(c.get() + 1));
}

unsafe impl GlobalAlloc for Recording {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Recording = Recording;

/// Runs `f`; returns its result, the largest allocation it made and how many.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    LARGEST.with(|l| l.set(0));
    let before = COUNT.with(Cell::get);
    let out = f();
    (out, LARGEST.with(Cell::get), COUNT.with(Cell::get) - before)
}

/// The most a decoded request may take per byte of its frame in one allocation: a decoded
/// element is at most a couple of hundred bytes of Rust struct, and takes at least one byte
/// on the wire. A count read unchecked would cost far more.
const BYTES_PER_FRAME_BYTE: usize = 256;
/// Allocations that do not depend on the frame (a BTreeMap node, an error message).
const FIXED_ALLOWANCE: usize = 64 << 10;

// ---- requests laid out by the schemas ----

/// Choices drawn from a byte string (zeros once it runs out), so proptest shrinks towards
/// small requests.
struct Entropy<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Entropy<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn below(&mut self, n: u8) -> u8 {
        self.byte() % n
    }
    fn fill(&mut self, out: &mut Vec<u8>, n: usize) {
        for _ in 0..n {
            let b = self.byte();
            out.push(b);
        }
    }
}

/// Writes Kafka's unsigned varint.
fn put_uvarint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Where an array's count was written, and in which form.
#[derive(Debug, Clone, Copy)]
struct CountAt {
    offset: usize,
    compact: bool,
}

struct Layout_<'e, 'b> {
    e: &'e mut Entropy<'b>,
    version: i16,
    flexible: bool,
}

impl Layout_<'_, '_> {
    fn string(&mut self, out: &mut Vec<u8>, nullable: bool, compact: bool) {
        let null = nullable && self.e.below(4) == 0;
        let len = usize::from(self.e.below(7));
        match (null, compact) {
            (true, true) => out.push(0),
            (true, false) => out.extend_from_slice(&(-1i16).to_be_bytes()),
            (false, true) => put_uvarint(out, len as u32 + 1),
            (false, false) => out.extend_from_slice(&(len as i16).to_be_bytes()),
        }
        if !null {
            for _ in 0..len {
                let c = b'a' + self.e.below(26);
                out.push(c);
            }
        }
    }

    fn value(&mut self, ty: &Ty, depth: u8, out: &mut Vec<u8>, counts: &mut Vec<CountAt>) {
        let flexible = self.flexible;
        match ty {
            Ty::I8 | Ty::Bool => self.e.fill(out, 1),
            Ty::I16 => self.e.fill(out, 2),
            Ty::I32 => self.e.fill(out, 4),
            Ty::I64 => self.e.fill(out, 8),
            Ty::Uuid => self.e.fill(out, 16),
            Ty::Str => self.string(out, false, flexible),
            Ty::NStr => self.string(out, true, flexible),
            Ty::Bytes | Ty::NBytes => {
                let null = matches!(ty, Ty::NBytes) && self.e.below(4) == 0;
                let len = usize::from(self.e.below(9));
                match (null, flexible) {
                    (true, true) => out.push(0),
                    (true, false) => out.extend_from_slice(&(-1i32).to_be_bytes()),
                    (false, true) => put_uvarint(out, len as u32 + 1),
                    (false, false) => out.extend_from_slice(&(len as i32).to_be_bytes()),
                }
                if !null {
                    self.e.fill(out, len);
                }
            }
            Ty::Array(element) | Ty::NArray(element) => {
                let null = matches!(ty, Ty::NArray(_)) && self.e.below(4) == 0;
                counts.push(CountAt {
                    offset: out.len(),
                    compact: flexible,
                });
                if null {
                    match flexible {
                        true => out.push(0),
                        false => out.extend_from_slice(&(-1i32).to_be_bytes()),
                    }
                    return;
                }
                let count = if depth >= 3 { 0 } else { self.e.below(4) };
                match flexible {
                    true => put_uvarint(out, u32::from(count) + 1),
                    false => out.extend_from_slice(&i32::from(count).to_be_bytes()),
                }
                for _ in 0..count {
                    self.value(element, depth + 1, out, counts);
                }
            }
            Ty::Struct(fields) => self.fields(fields, depth, out, counts),
            Ty::NStruct(fields) => {
                let null = self.e.below(4) == 0;
                out.push(if null { 0xff } else { 1 });
                if !null {
                    self.fields(fields, depth, out, counts);
                }
            }
        }
    }

    fn fields(
        &mut self,
        fields: &[Field],
        depth: u8,
        out: &mut Vec<u8>,
        counts: &mut Vec<CountAt>,
    ) {
        let version = self.version;
        let present = |f: &&Field| (f.lo..=f.hi).contains(&version);
        for field in fields.iter().filter(|f| f.tag.is_none()).filter(present) {
            self.value(&field.ty, depth, out, counts);
        }
        if !self.flexible {
            return;
        }
        // Known tags (each half the time), then unknown ones, in ascending order.
        let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
        for field in fields.iter().filter(|f| f.tag.is_some()).filter(present) {
            if self.e.below(2) == 0 {
                let mut value = Vec::new();
                // Counts inside a tagged value are not offered for the huge-count test.
                self.value(&field.ty, depth, &mut value, &mut Vec::new());
                tagged.push((field.tag.unwrap_or_default(), value));
            }
        }
        for i in 0..self.e.below(3) {
            let mut value = Vec::new();
            let len = usize::from(self.e.below(5));
            self.e.fill(&mut value, len);
            tagged.push((10 + u32::from(i), value));
        }
        put_uvarint(out, tagged.len() as u32);
        for (tag, value) in tagged {
            put_uvarint(out, tag);
            put_uvarint(out, value.len() as u32);
            out.extend_from_slice(&value);
        }
    }
}

/// A request frame (header and body) of `schema` at `version`, and where its counts are.
fn lay_out(schema: &Schema, version: i16, entropy: &[u8]) -> (Vec<u8>, Vec<CountAt>) {
    let mut e = Entropy {
        bytes: entropy,
        pos: 0,
    };
    let mut out = Vec::new();
    out.extend_from_slice(&(schema.api as i16).to_be_bytes());
    out.extend_from_slice(&version.to_be_bytes());
    e.fill(&mut out, 4);
    let header_flexible = schema.api.request_header_version(version) >= 2;
    let mut layout = Layout_ {
        e: &mut e,
        version,
        flexible: false,
    };
    layout.string(&mut out, true, false); // client_id
    if header_flexible {
        layout.flexible = true;
        layout.fields(&[], 0, &mut out, &mut Vec::new());
    }
    layout.flexible = version >= schema.flexible_from;
    let mut counts = Vec::new();
    layout.fields(schema.body, 0, &mut out, &mut counts);
    (out, counts)
}

/// Every API and version the walk knows.
fn pairs() -> Vec<(&'static Schema, i16)> {
    sanity::schemas()
        .iter()
        .flat_map(|s| (s.min..=s.max).map(move |v| (s, v)))
        .collect()
}

/// The API versions served, of those.
fn served_pairs() -> Vec<(&'static Schema, i16)> {
    pairs()
        .into_iter()
        .filter(|(s, v)| {
            SERVED
                .iter()
                .any(|&(api, min, max)| api == s.api && (min..=max).contains(v))
        })
        .collect()
}

/// Decodes a frame with kafka-protocol alone: header and body, and what is left over.
fn decode(api: ApiKey, version: i16, frame: &[u8]) -> (RequestHeader, RequestKind, usize) {
    let mut bytes = Bytes::copy_from_slice(frame);
    let header = RequestHeader::decode(&mut bytes, api.request_header_version(version))
        .unwrap_or_else(|e| panic!("{api:?} v{version}: header: {e:#}\n{frame:02x?}"));
    let request = RequestKind::decode(api, &mut bytes, version)
        .unwrap_or_else(|e| panic!("{api:?} v{version}: body: {e:#}\n{frame:02x?}"));
    (header, request, bytes.len())
}

/// The schemas against kafka-protocol, for one laid-out request.
fn check_against_codec(schema: &Schema, version: i16, entropy: &[u8]) {
    let api = schema.api;
    let (frame, _) = lay_out(schema, version, entropy);
    assert_eq!(
        sanity::check(api, version, &frame),
        Ok(frame.len()),
        "{api:?} v{version}: the walk reads its own layout whole"
    );
    let (header, request, left) = decode(api, version, &frame);
    assert_eq!(
        left, 0,
        "{api:?} v{version}: kafka-protocol leaves bytes of a request laid out by the schema: \
         the schema reads less than the decoder\n{frame:02x?}"
    );
    let mut encoded = BytesMut::new();
    header
        .encode(&mut encoded, api.request_header_version(version))
        .unwrap();
    if let Err(e) = request.encode(&mut encoded, version) {
        // A null kafka-protocol decodes in a version where Kafka's schema makes the field
        // non-nullable: its encoder refuses it, so it is not a request a client sends.
        assert!(
            format!("{e:#}").contains("null"),
            "{api:?} v{version}: {e:#}"
        );
        return;
    }
    assert_eq!(
        sanity::check(api, version, &encoded),
        Ok(encoded.len()),
        "{api:?} v{version}: kafka-protocol's encoding of {request:?} is refused or not read whole"
    );
}

/// A small deterministic byte stream for the exhaustive loops.
fn stream(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
fn every_api_and_version_laid_out_by_its_schema_decodes_whole_and_its_encoding_walks_whole() {
    let pairs = pairs();
    assert!(pairs.len() > 100, "{} API versions", pairs.len());
    for (schema, version) in pairs {
        for seed in 0..64 {
            check_against_codec(schema, version, &stream(seed, 400));
        }
        // All zeros: every array empty, every nullable present.
        check_against_codec(schema, version, &[]);
    }
}

#[test]
fn the_defaults_kafka_protocol_encodes_walk_whole() {
    for (schema, version) in pairs() {
        let api = schema.api;
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version);
        let mut frame = BytesMut::new();
        header
            .encode(&mut frame, api.request_header_version(version))
            .unwrap();
        let body = default_request(api);
        body.encode(&mut frame, version)
            .unwrap_or_else(|e| panic!("{api:?} v{version}: {e:#}"));
        assert_eq!(
            sanity::check(api, version, &frame),
            Ok(frame.len()),
            "{api:?} v{version}"
        );
    }
}

fn default_request(api: ApiKey) -> RequestKind {
    // Decoding a request of the API from its own default encoding would be circular; build
    // the default of each type instead.
    use kafka_protocol::messages::*;
    match api {
        ApiKey::Produce => RequestKind::Produce(Default::default()),
        ApiKey::Fetch => RequestKind::Fetch(Default::default()),
        ApiKey::ListOffsets => RequestKind::ListOffsets(Default::default()),
        ApiKey::Metadata => {
            RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(TopicName(
                    kafka_protocol::protocol::StrBytes::from_static_str("t"),
                ))),
            ])))
        }
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(Default::default()),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(Default::default()),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(Default::default()),
        ApiKey::JoinGroup => RequestKind::JoinGroup(Default::default()),
        ApiKey::Heartbeat => RequestKind::Heartbeat(Default::default()),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(Default::default()),
        ApiKey::SyncGroup => RequestKind::SyncGroup(Default::default()),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(Default::default()),
        ApiKey::ListGroups => RequestKind::ListGroups(Default::default()),
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(Default::default()),
        ApiKey::ApiVersions => RequestKind::ApiVersions(Default::default()),
        ApiKey::CreateTopics => RequestKind::CreateTopics(Default::default()),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(Default::default()),
        ApiKey::InitProducerId => RequestKind::InitProducerId(Default::default()),
        ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(Default::default()),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(Default::default()),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(Default::default()),
        // One of each nested struct, so the walk reaches them.
        ApiKey::CreatePartitions => {
            use kafka_protocol::messages::create_partitions_request::*;
            let assignment = CreatePartitionsAssignment::default().with_broker_ids(vec![0.into()]);
            let topic = CreatePartitionsTopic::default().with_assignments(Some(vec![assignment]));
            RequestKind::CreatePartitions(
                kafka_protocol::messages::CreatePartitionsRequest::default()
                    .with_topics(vec![topic]),
            )
        }
        ApiKey::IncrementalAlterConfigs => {
            use kafka_protocol::messages::incremental_alter_configs_request::*;
            let resource = AlterConfigsResource::default()
                .with_configs(vec![AlterableConfig::default().with_value(None)]);
            RequestKind::IncrementalAlterConfigs(
                kafka_protocol::messages::IncrementalAlterConfigsRequest::default()
                    .with_resources(vec![resource]),
            )
        }
        ApiKey::AlterConfigs => {
            use kafka_protocol::messages::alter_configs_request::*;
            let resource = AlterConfigsResource::default()
                .with_configs(vec![AlterableConfig::default().with_value(None)]);
            RequestKind::AlterConfigs(
                kafka_protocol::messages::AlterConfigsRequest::default()
                    .with_resources(vec![resource]),
            )
        }
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(Default::default()),
        ApiKey::DescribeLogDirs => {
            use kafka_protocol::messages::describe_log_dirs_request::*;
            let topic = DescribableLogDirTopic::default().with_partitions(vec![0]);
            RequestKind::DescribeLogDirs(
                kafka_protocol::messages::DescribeLogDirsRequest::default()
                    .with_topics(Some(vec![topic])),
            )
        }
        ApiKey::DeleteRecords => {
            use kafka_protocol::messages::delete_records_request::*;
            let topic = DeleteRecordsTopic::default()
                .with_partitions(vec![DeleteRecordsPartition::default()]);
            RequestKind::DeleteRecords(
                kafka_protocol::messages::DeleteRecordsRequest::default().with_topics(vec![topic]),
            )
        }
        ApiKey::DescribeClientQuotas => {
            use kafka_protocol::messages::describe_client_quotas_request::*;
            let component = ComponentData::default()
                .with_entity_type(kafka_protocol::protocol::StrBytes::from_static_str("user"))
                .with_match(Some(kafka_protocol::protocol::StrBytes::from_static_str(
                    "alice",
                )));
            RequestKind::DescribeClientQuotas(
                kafka_protocol::messages::DescribeClientQuotasRequest::default()
                    .with_components(vec![component]),
            )
        }
        ApiKey::AlterClientQuotas => {
            use kafka_protocol::messages::alter_client_quotas_request::*;
            let entity = EntityData::default()
                .with_entity_type(kafka_protocol::protocol::StrBytes::from_static_str(
                    "client-id",
                ))
                .with_entity_name(Some(kafka_protocol::protocol::StrBytes::from_static_str(
                    "app",
                )));
            let op = OpData::default()
                .with_key(kafka_protocol::protocol::StrBytes::from_static_str(
                    "producer_byte_rate",
                ))
                .with_value(1024.0);
            let entry = EntryData::default()
                .with_entity(vec![entity])
                .with_ops(vec![op]);
            RequestKind::AlterClientQuotas(
                kafka_protocol::messages::AlterClientQuotasRequest::default()
                    .with_entries(vec![entry]),
            )
        }
        ApiKey::DescribeProducers => {
            use kafka_protocol::messages::describe_producers_request::*;
            let topic = TopicRequest::default().with_partition_indexes(vec![0]);
            RequestKind::DescribeProducers(
                kafka_protocol::messages::DescribeProducersRequest::default()
                    .with_topics(vec![topic]),
            )
        }
        ApiKey::DescribeUserScramCredentials => {
            use kafka_protocol::messages::describe_user_scram_credentials_request::*;
            RequestKind::DescribeUserScramCredentials(
                kafka_protocol::messages::DescribeUserScramCredentialsRequest::default()
                    .with_users(Some(vec![UserName::default()])),
            )
        }
        ApiKey::AlterUserScramCredentials => {
            use kafka_protocol::messages::alter_user_scram_credentials_request::*;
            RequestKind::AlterUserScramCredentials(
                kafka_protocol::messages::AlterUserScramCredentialsRequest::default()
                    .with_deletions(vec![ScramCredentialDeletion::default()])
                    .with_upsertions(vec![ScramCredentialUpsertion::default()]),
            )
        }
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(
            kafka_protocol::messages::DeleteGroupsRequest::default()
                .with_groups_names(vec![Default::default()]),
        ),
        ApiKey::DescribeTopicPartitions => {
            use kafka_protocol::messages::describe_topic_partitions_request::*;
            RequestKind::DescribeTopicPartitions(
                kafka_protocol::messages::DescribeTopicPartitionsRequest::default()
                    .with_topics(vec![TopicRequest::default()])
                    .with_cursor(Some(Cursor::default())),
            )
        }
        ApiKey::OffsetDelete => {
            use kafka_protocol::messages::offset_delete_request::*;
            let topic = OffsetDeleteRequestTopic::default()
                .with_partitions(vec![OffsetDeleteRequestPartition::default()]);
            RequestKind::OffsetDelete(
                kafka_protocol::messages::OffsetDeleteRequest::default().with_topics(vec![topic]),
            )
        }
        ApiKey::ConsumerGroupHeartbeat => {
            use kafka_protocol::messages::consumer_group_heartbeat_request::*;
            let owned = TopicPartitions::default().with_partitions(vec![0]);
            RequestKind::ConsumerGroupHeartbeat(
                kafka_protocol::messages::ConsumerGroupHeartbeatRequest::default()
                    .with_subscribed_topic_names(Some(vec![Default::default()]))
                    .with_topic_partitions(Some(vec![owned])),
            )
        }
        ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(
            kafka_protocol::messages::ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![Default::default()]),
        ),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(
            kafka_protocol::messages::DescribeAclsRequest::default()
                .with_resource_name_filter(Some(Default::default())),
        ),
        ApiKey::CreateAcls => RequestKind::CreateAcls(
            kafka_protocol::messages::CreateAclsRequest::default()
                .with_creations(vec![Default::default()]),
        ),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(
            kafka_protocol::messages::DeleteAclsRequest::default()
                .with_filters(vec![Default::default()]),
        ),
        other => panic!("no default request for {other:?}: add it with its schema"),
    }
}

#[test]
fn every_served_api_and_version_has_a_schema() {
    for &(api, min, max) in SERVED {
        let schema = sanity::schema(api).unwrap_or_else(|| panic!("{api:?} has no schema"));
        assert!(
            schema.min <= min && max <= schema.max,
            "{api:?} v{min}..v{max} served, schema v{}..v{}",
            schema.min,
            schema.max
        );
    }
}

/// The versions kafka-protocol's decoder of `api`'s request reads (its `Message::VERSIONS`;
/// `ApiKey::valid_versions` can list more, e.g. InitProducerId v6, that it refuses).
fn request_versions(api: ApiKey) -> kafka_protocol::protocol::VersionRange {
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::Message;
    match api {
        ApiKey::Produce => ProduceRequest::VERSIONS,
        ApiKey::Fetch => FetchRequest::VERSIONS,
        ApiKey::ListOffsets => ListOffsetsRequest::VERSIONS,
        ApiKey::Metadata => MetadataRequest::VERSIONS,
        ApiKey::OffsetCommit => OffsetCommitRequest::VERSIONS,
        ApiKey::OffsetFetch => OffsetFetchRequest::VERSIONS,
        ApiKey::FindCoordinator => FindCoordinatorRequest::VERSIONS,
        ApiKey::JoinGroup => JoinGroupRequest::VERSIONS,
        ApiKey::Heartbeat => HeartbeatRequest::VERSIONS,
        ApiKey::LeaveGroup => LeaveGroupRequest::VERSIONS,
        ApiKey::SyncGroup => SyncGroupRequest::VERSIONS,
        ApiKey::DescribeGroups => DescribeGroupsRequest::VERSIONS,
        ApiKey::ListGroups => ListGroupsRequest::VERSIONS,
        ApiKey::SaslHandshake => SaslHandshakeRequest::VERSIONS,
        ApiKey::ApiVersions => ApiVersionsRequest::VERSIONS,
        ApiKey::CreateTopics => CreateTopicsRequest::VERSIONS,
        ApiKey::DeleteTopics => DeleteTopicsRequest::VERSIONS,
        ApiKey::InitProducerId => InitProducerIdRequest::VERSIONS,
        ApiKey::OffsetForLeaderEpoch => OffsetForLeaderEpochRequest::VERSIONS,
        ApiKey::DescribeConfigs => DescribeConfigsRequest::VERSIONS,
        ApiKey::SaslAuthenticate => SaslAuthenticateRequest::VERSIONS,
        ApiKey::CreatePartitions => CreatePartitionsRequest::VERSIONS,
        ApiKey::IncrementalAlterConfigs => IncrementalAlterConfigsRequest::VERSIONS,
        ApiKey::AlterConfigs => AlterConfigsRequest::VERSIONS,
        ApiKey::DescribeCluster => DescribeClusterRequest::VERSIONS,
        ApiKey::DescribeLogDirs => DescribeLogDirsRequest::VERSIONS,
        ApiKey::DeleteRecords => DeleteRecordsRequest::VERSIONS,
        ApiKey::DescribeProducers => DescribeProducersRequest::VERSIONS,
        ApiKey::DescribeClientQuotas => DescribeClientQuotasRequest::VERSIONS,
        ApiKey::AlterClientQuotas => AlterClientQuotasRequest::VERSIONS,
        ApiKey::DescribeUserScramCredentials => DescribeUserScramCredentialsRequest::VERSIONS,
        ApiKey::AlterUserScramCredentials => AlterUserScramCredentialsRequest::VERSIONS,
        ApiKey::DeleteGroups => DeleteGroupsRequest::VERSIONS,
        ApiKey::OffsetDelete => OffsetDeleteRequest::VERSIONS,
        ApiKey::DescribeTopicPartitions => DescribeTopicPartitionsRequest::VERSIONS,
        ApiKey::ConsumerGroupHeartbeat => ConsumerGroupHeartbeatRequest::VERSIONS,
        ApiKey::ConsumerGroupDescribe => ConsumerGroupDescribeRequest::VERSIONS,
        ApiKey::DescribeAcls => DescribeAclsRequest::VERSIONS,
        ApiKey::CreateAcls => CreateAclsRequest::VERSIONS,
        ApiKey::DeleteAcls => DeleteAclsRequest::VERSIONS,
        other => panic!("{other:?} has no schema: add one in src/listener/sanity/schemas.rs"),
    }
}

#[test]
fn every_api_with_a_schema_covers_its_decoders_versions() {
    for schema in sanity::schemas() {
        let codec = request_versions(schema.api);
        assert_eq!(
            (schema.min, schema.max),
            (codec.min, codec.max),
            "{:?}",
            schema.api
        );
    }
}

/// `frame` with the count at `at` replaced by `count`, in the same form.
fn with_count(frame: &[u8], at: CountAt, count: u32) -> Vec<u8> {
    let mut out = frame[..at.offset].to_vec();
    let old_len = if at.compact {
        frame[at.offset..]
            .iter()
            .take_while(|&&b| b >= 0x80)
            .count()
            + 1
    } else {
        4
    };
    if at.compact {
        put_uvarint(&mut out, count.saturating_add(1));
    } else {
        out.extend_from_slice(&(count.min(i32::MAX as u32) as i32).to_be_bytes());
    }
    out.extend_from_slice(&frame[at.offset + old_len..]);
    out
}

#[test]
fn every_array_count_made_huge_is_refused_where_the_decoder_would_read_it() {
    let mut checked = 0;
    for (schema, version) in pairs() {
        let api = schema.api;
        for seed in 0..16 {
            let (frame, counts) = lay_out(schema, version, &stream(seed, 400));
            // The frame decodes whole, so the decoder reads each of these counts where the
            // walk does: left unchecked, a huge one would reach `Vec::with_capacity`.
            assert_eq!(decode(api, version, &frame).2, 0);
            for &at in &counts {
                for huge in [i32::MAX as u32, u32::MAX - 1, frame.len() as u32] {
                    let bad = with_count(&frame, at, huge);
                    match sanity::check(api, version, &bad) {
                        Err(SanityError::ArrayTooLong { at: offset, .. }) => {
                            assert_eq!(offset, at.offset, "{api:?} v{version}")
                        }
                        other => panic!("{api:?} v{version} count {huge}: {other:?}"),
                    }
                    assert!(read_request(Bytes::from(bad)).is_err());
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 1000, "{checked} counts");
}

#[test]
fn a_ten_byte_metadata_request_declaring_two_billion_topics_is_refused_without_allocating() {
    // api key 3 (Metadata), v0, correlation id 1, null client id, topics: i32::MAX.
    let frame = [0, 3, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff];
    let (checked, _, allocations) = measured(|| sanity::check(ApiKey::Metadata, 0, &frame));
    assert_eq!(
        checked,
        Err(SanityError::ArrayTooLong {
            at: 10,
            count: i32::MAX as u64,
            remaining: 0
        })
    );
    assert_eq!(allocations, 0, "the walk allocates nothing");
    let refused = read_request(Bytes::copy_from_slice(&frame)).unwrap_err();
    assert!(refused.contains("refused before decoding"), "{refused}");
}

#[test]
fn without_the_check_the_decoder_sizes_an_array_from_the_wire_count() {
    // What the check exists for, at a size that is safe to run: 100 000 topics declared in a
    // 4-byte body make kafka-protocol reserve room for all of them before it fails.
    let count = 100_000usize;
    let mut body = Bytes::copy_from_slice(&(count as i32).to_be_bytes());
    let (decoded, largest, _) = measured(|| MetadataRequest::decode(&mut body, 0));
    assert!(decoded.is_err(), "no topic follows the count");
    assert!(
        largest >= count * std::mem::size_of::<MetadataRequestTopic>(),
        "largest allocation {largest} bytes"
    );
}

// ---- the request path fuzzed ----

fn assert_bounded(frame: &[u8]) {
    let frame = frame.to_vec();
    let len = frame.len();
    let (_, largest, _) = measured(|| fuzz_request::check_request(&frame));
    assert!(
        largest <= FIXED_ALLOWANCE + len * BYTES_PER_FRAME_BYTE,
        "a {len}-byte frame allocated {largest} bytes at once: {frame:02x?}"
    );
}

/// Damages a frame: flips, overwrites, inserts, deletes, cuts.
fn damage(frame: &mut Vec<u8>, edits: &[(u8, u16, u8)]) {
    for &(kind, at, byte) in edits {
        if frame.is_empty() {
            return;
        }
        let at = usize::from(at) % frame.len();
        match kind % 5 {
            0 => frame[at] ^= 1 << (byte % 8),
            1 => frame[at] = byte,
            2 => frame.insert(at, byte),
            3 => {
                frame.remove(at);
            }
            _ => frame.truncate(at.max(8)),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_requests_of_every_api_and_version_pass_through_the_codec_and_the_walk(
        pick in any::<prop::sample::Index>(),
        entropy in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        let pairs = pairs();
        let (schema, version) = pairs[pick.index(pairs.len())];
        check_against_codec(schema, version, &entropy);
    }

    #[test]
    fn arbitrary_frames_never_panic_nor_allocate_beyond_their_size(
        data in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        assert_bounded(&data);
        if let Some(frame) = fuzz_request::as_served_frame(&data) {
            assert_bounded(&frame);
        }
    }

    #[test]
    fn damaged_valid_frames_never_panic_nor_allocate_beyond_their_size(
        pick in any::<prop::sample::Index>(),
        entropy in prop::collection::vec(any::<u8>(), 0..400),
        edits in prop::collection::vec((any::<u8>(), any::<u16>(), any::<u8>()), 1..6),
    ) {
        let pairs = served_pairs();
        let (schema, version) = pairs[pick.index(pairs.len())];
        let (mut frame, _) = lay_out(schema, version, &entropy);
        damage(&mut frame, &edits);
        assert_bounded(&frame);
    }

    #[test]
    fn arbitrary_bytes_on_a_tls_port_close_the_connection_within_bounded_memory(
        hello_part in any::<prop::sample::Index>(),
        tail in prop::collection::vec(any::<u8>(), 0..2000),
        from_hello in any::<bool>(),
    ) {
        let (check, hello) = tls_accept();
        // Half the inputs start as a real ClientHello, so that they reach past the first
        // record into the handshake before going wrong.
        let mut bytes = Vec::new();
        if from_hello {
            bytes.extend_from_slice(&hello[..hello_part.index(hello.len())]);
        }
        bytes.extend_from_slice(&tail);
        let (accepted, largest, _) = measured(|| check.accept(&bytes));
        prop_assert!(!accepted.handshake, "a handshake completed on {bytes:02x?}");
        prop_assert!(accepted.closed, "the connection stayed open on {bytes:02x?}");
        prop_assert!(largest <= TLS_ALLOWANCE, "{largest} bytes at once on {bytes:02x?}");
    }
}

/// The most one allocation of the TLS accept path may take: rustls's record buffers
/// (a 16 KiB record and its overhead) and the in-memory stream's.
const TLS_ALLOWANCE: usize = 256 << 10;

/// The accept path of a TLS port (certificates made once) and a real ClientHello for it.
fn tls_accept() -> &'static (nanokafka::internals::listener::TlsAcceptCheck, Vec<u8>) {
    static CHECK: std::sync::OnceLock<(nanokafka::internals::listener::TlsAcceptCheck, Vec<u8>)> =
        std::sync::OnceLock::new();
    CHECK.get_or_init(|| {
        // The files are read here; the temp dir may go.
        let certs = tls_certs::Certs::new();
        let check = nanokafka::internals::listener::TlsAcceptCheck::new(&certs.server(false));
        (check.unwrap(), tls_certs::client_hello(&certs))
    })
}

//! How the console shows a record's key, value or header value: every rendering the page may
//! pick from, each made from at most `max_field_bytes` of the field.
//!
//! ```text
//! {"size": n,             the field's full length in bytes
//!  "truncated": bool,     whether only the first max_field_bytes were rendered
//!  "utf8": "..." | null,  the bytes as text, when they are valid UTF-8 (a truncated field
//!                         cut inside a character counts as valid up to that character)
//!  "json": value | null,  the text parsed as JSON, when it parses (never when truncated)
//!  "msgpack": v | null,   the bytes decoded as exactly one whole MessagePack value (what the
//!                         typed produce methods write; never when truncated)
//!  "hex": "..."}          always: two lowercase hex digits a byte
//! ```

use serde_json::{json, Value};

/// The default `max_field_bytes`: 64 KiB.
pub(super) const DEFAULT_MAX_FIELD_BYTES: usize = 64 << 10;
/// The largest `max_field_bytes` a request may ask for: 1 MiB.
pub(super) const MAX_FIELD_BYTES: usize = 1 << 20;

/// The field `bytes` as the console shows it, from at most `max` of its bytes.
pub(super) fn render(bytes: &[u8], max: usize) -> Value {
    let truncated = bytes.len() > max;
    let shown = &bytes[..bytes.len().min(max)];
    let utf8 = match std::str::from_utf8(shown) {
        Ok(text) => Some(text),
        // A cut inside a character: the text up to it, when the rest is valid.
        Err(e) if truncated && e.error_len().is_none() => {
            std::str::from_utf8(&shown[..e.valid_up_to()]).ok()
        }
        Err(_) => None,
    };
    let parsed = |text: &str| serde_json::from_str::<Value>(text).ok();
    let json = utf8.filter(|_| !truncated).and_then(parsed);
    let msgpack = if truncated { None } else { msgpack(shown) };
    json!({
        "size": bytes.len(),
        "truncated": truncated,
        "utf8": utf8,
        "json": json,
        "msgpack": msgpack,
        "hex": hex(shown),
    })
}

/// `bytes` as one whole MessagePack value, or `None` (not MessagePack, or bytes left over).
fn msgpack(bytes: &[u8]) -> Option<Value> {
    if bytes.is_empty() {
        return None;
    }
    let mut rest = bytes;
    let value: Value =
        serde::Deserialize::deserialize(&mut rmp_serde::Deserializer::new(&mut rest)).ok()?;
    rest.is_empty().then_some(value)
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// `(trace_id, span_id)` of a W3C `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`), when it
/// is one (version 00, ids not all zeros, lowercase hex).
pub(super) fn traceparent(value: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let is_hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let zeros = |s: &str| s.bytes().all(|b| b == b'0');
    let well_formed = parts.next().is_none()
        && version == "00"
        && is_hex(trace, 32)
        && is_hex(span, 16)
        && is_hex(flags, 2)
        && !zeros(trace)
        && !zeros(span);
    well_formed.then(|| (trace.to_owned(), span.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rendering_a_field_allows() {
        let f = render(br#"{"a": 1}"#, 1024);
        assert_eq!(f["size"], 8);
        assert_eq!(f["truncated"], false);
        assert_eq!(f["utf8"], r#"{"a": 1}"#);
        assert_eq!(f["json"], json!({"a": 1}));
        assert_eq!(f["hex"], "7b2261223a20317d");

        let packed = rmp_serde::to_vec_named(&json!({"id": 7, "name": "x"})).unwrap();
        let f = render(&packed, 1024);
        assert_eq!(f["msgpack"], json!({"id": 7, "name": "x"}));

        // Bytes after one MessagePack value: not one whole value.
        let mut extra = packed.clone();
        extra.push(0xc0);
        assert_eq!(render(&extra, 1024)["msgpack"], Value::Null);

        let f = render(&[0xff, 0xfe, 0x00], 1024);
        assert_eq!(f["utf8"], Value::Null);
        assert_eq!(f["hex"], "fffe00");
    }

    #[test]
    fn a_large_field_is_cut_at_the_cap_with_its_full_size() {
        let big = vec![b'a'; 100_000];
        let f = render(&big, 1000);
        assert_eq!(f["size"], 100_000);
        assert_eq!(f["truncated"], true);
        assert_eq!(f["utf8"].as_str().unwrap().len(), 1000);
        assert_eq!(f["hex"].as_str().unwrap().len(), 2000);
        assert_eq!(f["json"], Value::Null);
        // A cut inside a two-byte character keeps the text before it.
        let f = render("aé".as_bytes(), 2);
        assert_eq!(f["utf8"], "a");
    }

    #[test]
    fn traceparent_is_parsed_to_the_letter() {
        let ok = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            traceparent(ok),
            Some((
                "4bf92f3577b34da6a3ce929d0e0e4736".into(),
                "00f067aa0ba902b7".into()
            ))
        );
        for bad in [
            &b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"[..],
            b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            b"\xff",
        ] {
            assert_eq!(traceparent(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}

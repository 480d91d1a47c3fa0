//! A request's shape checked before it is decoded, so that no count a client writes can make
//! the decoder allocate more than the frame could hold.
//!
//! # Why
//! kafka-protocol's array decoders (`Array`, `CompactArray`) read an element count from the
//! wire and call `Vec::with_capacity(count)` before reading a single element. A request of a
//! dozen bytes declaring 2^31 topics would make the process ask for hundreds of GB, and an
//! allocation failure aborts the process: it is not a panic, nothing can catch it. The frame
//! cap does not help, since the count costs four bytes whatever it says.
//!
//! # How
//! [`check`] walks the frame (header and body) with the schema of its API and version
//! ([`schemas`]), reading every length and count where the decoder will read it, and refuses
//! the request when an array declares more elements than bytes remain in the frame (every
//! element takes at least one byte), when a string or bytes field is longer than what
//! remains, or when the frame ends inside a field. Kafka's own broker refuses the same
//! arrays ("Tried to allocate a collection of size N, but there are only M bytes
//! remaining"), so no request a Kafka broker would read is refused here.
//!
//! # Why it is sound
//! The walk mirrors kafka-protocol's generated decoders step by step: the same fields in the
//! same versions, compact encodings exactly in the API's flexible versions, and tagged fields
//! read as the decoder reads them (a known tag's value decoded by its type from the stream,
//! an unknown one skipped by its size). So each count the decoder passes to `with_capacity`
//! was read here at the same offset and checked against the same remaining bytes: after a
//! successful walk, every array the decoder sizes holds at most one element per byte of the
//! frame. Where the decoder would fail (a negative length, a tag not valid in the version)
//! the walk may fail too or go on; either way the decoder stops there. The walk allocates
//! nothing and its loops are bounded by the frame's length.
//!
//! The schemas are checked against kafka-protocol itself by `tests/request_sanity.rs`:
//! random requests laid out by these schemas must decode with kafka-protocol and consume
//! exactly the frame, and kafka-protocol's encoding of what it decoded must walk to its last
//! byte. An API served without a schema here is refused whole (and that test fails).
//!
//! Strings and bytes need no such check for the decoder's sake: every request field of the
//! served APIs decodes them as slices of the frame (`try_get_bytes`, which checks the length
//! against the remaining bytes before it takes anything); none decodes into an owned `String`
//! or `Vec<u8>`, the two decoders that allocate a declared length first.

mod schemas;

use kafka_protocol::messages::ApiKey;

/// Why a request was refused before decoding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SanityError {
    #[error("{api:?} v{version} has no request schema to check it against")]
    NoSchema { api: ApiKey, version: i16 },
    #[error("the request ends inside a field at byte {at}")]
    Truncated { at: usize },
    #[error("array of {count} elements at byte {at} with only {remaining} bytes left")]
    ArrayTooLong {
        at: usize,
        count: u64,
        remaining: usize,
    },
    #[error("field of {len} bytes at byte {at} with only {remaining} bytes left")]
    FieldTooLong {
        at: usize,
        len: u64,
        remaining: usize,
    },
    #[error("negative length {len} at byte {at}")]
    NegativeLength { at: usize, len: i64 },
    #[error("tagged field {tag} is not valid in this version (byte {at})")]
    TagNotInVersion { at: usize, tag: u32 },
}

/// The wire type of a field, as kafka-protocol decodes it. Strings, bytes and arrays take
/// their compact form (unsigned varint length + 1, 0 for null) in the API's flexible
/// versions, and the classic one (i16 / i32 length, -1 for null) before.
#[derive(Debug)]
pub enum Ty {
    I8,
    I16,
    I32,
    I64,
    Bool,
    Uuid,
    /// A string the decoder does not accept null for.
    Str,
    /// A nullable string (`Option<_>` in kafka-protocol).
    NStr,
    Bytes,
    NBytes,
    Array(&'static Ty),
    NArray(&'static Ty),
    /// A struct's fields, then (in flexible versions) its tagged fields.
    Struct(&'static [Field]),
    /// A nullable struct: an `i8` marker (1: the struct follows; anything else: null, as
    /// the decoder reads it), then the struct.
    NStruct(&'static [Field]),
}

/// One field of a struct, present in versions `lo..=hi`; `tag` for a tagged field.
#[derive(Debug)]
pub struct Field {
    pub lo: i16,
    pub hi: i16,
    pub tag: Option<u32>,
    pub ty: Ty,
}

impl Field {
    fn in_version(&self, version: i16) -> bool {
        (self.lo..=self.hi).contains(&version)
    }
}

/// An API's request: the codec's versions, the first flexible one, the top-level struct.
#[derive(Debug)]
pub struct Schema {
    pub api: ApiKey,
    pub min: i16,
    pub max: i16,
    /// `i16::MAX` when no version is flexible.
    pub flexible_from: i16,
    pub body: &'static [Field],
}

/// The schema of `api`'s requests, if it has one.
pub fn schema(api: ApiKey) -> Option<&'static Schema> {
    schemas::ALL.iter().find(|s| s.api == api)
}

/// Every API with a schema.
#[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
pub fn schemas() -> &'static [Schema] {
    schemas::ALL
}

/// Walks a whole request frame (header and body, without the size prefix) of `api` at
/// `version`. Returns how many bytes the header and body take; the decoder ignores the rest.
///
/// # Errors
/// [`SanityError`] when the frame could make the decoder allocate beyond its size, when it
/// ends inside a field, or when `api` at `version` has no schema.
pub fn check(api: ApiKey, version: i16, frame: &[u8]) -> Result<usize, SanityError> {
    let schema = schema(api)
        .filter(|s| (s.min..=s.max).contains(&version))
        .ok_or(SanityError::NoSchema { api, version })?;
    let flexible = version >= schema.flexible_from;
    let mut walk = Walk {
        buf: frame,
        pos: 0,
        version,
        flexible,
    };
    walk.header(api.request_header_version(version) >= 2)?;
    walk.fields(schema.body)?;
    Ok(walk.pos)
}

/// The walk's cursor over one frame.
struct Walk<'a> {
    buf: &'a [u8],
    pos: usize,
    version: i16,
    flexible: bool,
}

impl Walk<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&[u8], SanityError> {
        if n > self.remaining() {
            return Err(SanityError::Truncated { at: self.pos });
        }
        let taken = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(taken)
    }

    fn skip(&mut self, len: u64) -> Result<(), SanityError> {
        let remaining = self.remaining();
        if len > remaining as u64 {
            return Err(SanityError::FieldTooLong {
                at: self.pos,
                len,
                remaining,
            });
        }
        self.pos += len as usize;
        Ok(())
    }

    fn i16(&mut self) -> Result<i16, SanityError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, SanityError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// kafka-protocol's unsigned varint exactly: at most five bytes, bits past 32 dropped, a
    /// fifth byte's continuation bit ignored.
    fn uvarint(&mut self) -> Result<u32, SanityError> {
        let mut value = 0u32;
        for i in 0..5 {
            let b = u32::from(self.take(1)?[0]);
            value |= (b & 0x7f) << (i * 7);
            if b < 0x80 {
                break;
            }
        }
        Ok(value)
    }

    /// The request header: api key, version, correlation id, the client id (always the
    /// classic nullable string, even in flexible versions), then tagged fields in flexible
    /// versions (header v2), none of them known.
    fn header(&mut self, flexible: bool) -> Result<(), SanityError> {
        self.take(8)?;
        self.string_classic()?;
        if flexible {
            self.tagged(&[])?;
        }
        Ok(())
    }

    fn string_classic(&mut self) -> Result<(), SanityError> {
        let at = self.pos;
        match self.i16()? {
            -1 => Ok(()),
            len if len < 0 => Err(SanityError::NegativeLength {
                at,
                len: len.into(),
            }),
            len => self.skip(len as u64),
        }
    }

    /// A compact length (varint, 0 for null); the length it announces, if not null.
    fn compact_len(&mut self) -> Result<Option<u64>, SanityError> {
        Ok(match self.uvarint()? {
            0 => None,
            n => Some(u64::from(n) - 1),
        })
    }

    fn fields(&mut self, fields: &'static [Field]) -> Result<(), SanityError> {
        for field in fields.iter().filter(|f| f.tag.is_none()) {
            if field.in_version(self.version) {
                self.value(&field.ty)?;
            }
        }
        if self.flexible {
            self.tagged(fields)?;
        }
        Ok(())
    }

    /// A tagged-field section: count, then (tag, size, value) each. A known tag's value is
    /// walked by its type, as the decoder reads it (the size is not used to bound it); an
    /// unknown one is skipped by its size.
    fn tagged(&mut self, fields: &'static [Field]) -> Result<(), SanityError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            // Each pass takes at least two bytes, so the loop ends with the frame.
            let at = self.pos;
            let tag = self.uvarint()?;
            let size = self.uvarint()?;
            match fields.iter().find(|f| f.tag == Some(tag)) {
                Some(field) if field.in_version(self.version) => self.value(&field.ty)?,
                Some(_) => return Err(SanityError::TagNotInVersion { at, tag }),
                None => self.skip(size.into())?,
            }
        }
        Ok(())
    }

    fn value(&mut self, ty: &'static Ty) -> Result<(), SanityError> {
        match ty {
            Ty::I8 | Ty::Bool => self.take(1).map(drop),
            Ty::I16 => self.take(2).map(drop),
            Ty::I32 => self.take(4).map(drop),
            Ty::I64 => self.take(8).map(drop),
            Ty::Uuid => self.take(16).map(drop),
            Ty::Str | Ty::NStr if self.flexible => match self.compact_len()? {
                Some(len) => self.skip(len),
                None => Ok(()),
            },
            Ty::Str | Ty::NStr => self.string_classic(),
            Ty::Bytes | Ty::NBytes if self.flexible => match self.compact_len()? {
                Some(len) => self.skip(len),
                None => Ok(()),
            },
            Ty::Bytes | Ty::NBytes => {
                let at = self.pos;
                match self.i32()? {
                    -1 => Ok(()),
                    len if len < 0 => Err(SanityError::NegativeLength {
                        at,
                        len: len.into(),
                    }),
                    len => self.skip(len as u64),
                }
            }
            Ty::Array(element) | Ty::NArray(element) => {
                let at = self.pos;
                let count = if self.flexible {
                    self.compact_len()?
                } else {
                    match self.i32()? {
                        -1 => None,
                        len if len < 0 => {
                            return Err(SanityError::NegativeLength {
                                at,
                                len: len.into(),
                            })
                        }
                        len => Some(len as u64),
                    }
                };
                let Some(count) = count else { return Ok(()) };
                let remaining = self.remaining();
                if count > remaining as u64 {
                    return Err(SanityError::ArrayTooLong {
                        at,
                        count,
                        remaining,
                    });
                }
                for _ in 0..count {
                    self.value(element)?;
                }
                Ok(())
            }
            Ty::Struct(fields) => self.fields(fields),
            Ty::NStruct(fields) => match self.take(1)?[0] {
                1 => self.fields(fields),
                _ => Ok(()),
            },
        }
    }
}

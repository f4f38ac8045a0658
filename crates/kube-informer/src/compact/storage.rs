//! How a compact object keeps its JSON: as is ([`Plain`]) or zstd-compressed (`Zstd`, feature `zstd`).

use std::{any::TypeId, borrow::Cow};

use serde_json::value::RawValue;

/// How a [`Compact`](super::Compact) object keeps its JSON bytes.
pub trait JsonStorage: Send + Sync + 'static {
    /// Keeps `json` (one JSON value, valid UTF-8).
    fn store(json: Box<RawValue>) -> Box<[u8]>;

    /// The JSON back, exactly as given to [`store`](Self::store).
    fn load(stored: &[u8]) -> Cow<'_, str>;

    /// Keeps other bytes (an object received in protobuf); as they are unless overridden.
    fn store_bytes(bytes: &[u8]) -> Box<[u8]> {
        bytes.into()
    }

    /// The bytes back, exactly as given to [`store_bytes`](Self::store_bytes).
    fn load_bytes(stored: &[u8]) -> Cow<'_, [u8]> {
        Cow::Borrowed(stored)
    }
}

/// Keeps `json`, text this crate has already read whole as one JSON value (the JSON reader
/// that cuts managedFields out hands objects over this way). The built-in storages keep it
/// without reading it again: checking it once more cost more than half of a compact object's
/// arrival (decode bench, "compact json, no managedFields"). Another storage gets it through
/// [`JsonStorage::store`], checked again, as its contract promises.
pub(super) fn store_checked<S: JsonStorage>(json: String) -> Result<Box<[u8]>, serde_json::Error> {
    if TypeId::of::<S>() == TypeId::of::<Plain>() {
        return Ok(json.into_bytes().into_boxed_slice());
    }
    #[cfg(feature = "zstd")]
    if TypeId::of::<S>() == TypeId::of::<Zstd>() {
        // `Zstd::store` keeps the JSON's bytes through `store_bytes`.
        return Ok(S::store_bytes(json.as_bytes()));
    }
    Ok(S::store(RawValue::from_string(json)?))
}

/// The JSON as received: reading it is free (the default).
#[derive(Debug, Clone, Copy)]
pub enum Plain {}

impl JsonStorage for Plain {
    fn store(json: Box<RawValue>) -> Box<[u8]> {
        let json: Box<str> = json.into();
        json.into_boxed_bytes()
    }

    fn load(stored: &[u8]) -> Cow<'_, str> {
        // Only ever holds what `store` was given: valid UTF-8.
        String::from_utf8_lossy(stored)
    }
}

/// The JSON zstd-compressed (level 1, about a quarter of the size for a Pod): less memory,
/// but each object costs a compression when it arrives and a decompression when its JSON is
/// read (`decode`, `json`, serializing). Needs the `zstd` feature.
#[cfg(feature = "zstd")]
#[derive(Debug, Clone, Copy)]
pub enum Zstd {}

#[cfg(feature = "zstd")]
mod zstd_storage {
    use std::{borrow::Cow, cell::RefCell};

    use serde_json::value::RawValue;

    use super::{JsonStorage, Zstd};

    /// Compression level: the fastest standard level; higher ones gain little on objects
    /// this small.
    const LEVEL: i32 = 1;

    thread_local! {
        static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
        static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    }

    impl JsonStorage for Zstd {
        /// Stored as the JSON's length (4 bytes, little endian) then the zstd frame; JSON
        /// that does not compress (or a compressor failure) is kept as is, length 0.
        fn store(json: Box<RawValue>) -> Box<[u8]> {
            Self::store_bytes(json.get().as_bytes())
        }

        fn load(stored: &[u8]) -> Cow<'_, str> {
            // Only ever holds what `store` was given: valid UTF-8.
            match Self::load_bytes(stored) {
                Cow::Borrowed(bytes) => String::from_utf8_lossy(bytes),
                Cow::Owned(bytes) => Cow::Owned(String::from_utf8_lossy(&bytes).into_owned()),
            }
        }

        fn store_bytes(bytes: &[u8]) -> Box<[u8]> {
            let compressed = COMPRESSOR.with(|c| {
                let mut c = c.borrow_mut();
                if c.is_none() {
                    *c = zstd::bulk::Compressor::new(LEVEL).ok();
                }
                c.as_mut()?.compress(bytes).ok()
            });
            let length = u32::try_from(bytes.len()).ok();
            let mut stored = Vec::new();
            match (compressed, length) {
                (Some(frame), Some(length)) if frame.len() < bytes.len() => {
                    stored.reserve_exact(4 + frame.len());
                    stored.extend_from_slice(&length.to_le_bytes());
                    stored.extend_from_slice(&frame);
                }
                _ => {
                    stored.reserve_exact(4 + bytes.len());
                    stored.extend_from_slice(&0u32.to_le_bytes());
                    stored.extend_from_slice(bytes);
                }
            }
            stored.into_boxed_slice()
        }

        fn load_bytes(stored: &[u8]) -> Cow<'_, [u8]> {
            let (length, body) = stored.split_at(4.min(stored.len()));
            let length = u32::from_le_bytes(length.try_into().unwrap_or([0; 4])) as usize;
            if length == 0 {
                return Cow::Borrowed(body);
            }
            let bytes = DECOMPRESSOR.with(|d| {
                let mut d = d.borrow_mut();
                if d.is_none() {
                    *d = zstd::bulk::Decompressor::new().ok();
                }
                d.as_mut()?.decompress(body, length).ok()
            });
            // Only ever holds what `store` made, so neither fails but for memory exhaustion.
            Cow::Owned(bytes.unwrap_or_default())
        }
    }
}

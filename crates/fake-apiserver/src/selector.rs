//! Label and field selectors, parsed and matched as the real server does.

use std::collections::BTreeSet;

use crate::meta::Meta;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(Vec<Requirement>);

/// A parsed `fieldSelector`: `(path, value, equal?)` requirements.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector(Vec<(String, String, bool)>);

/// Which objects a LIST or WATCH wants.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub(crate) namespace: Option<String>,
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
    /// A `shardSelector` the server honours (KEP-5866).
    pub(crate) shard: Option<crate::shard::ShardSelector>,
}

impl Filter {
    pub(crate) fn matches(&self, meta: &Meta) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| meta.namespace.as_deref() == Some(ns))
            && self.labels.matches(meta)
            && self.fields.matches(meta)
            && self.shard.as_ref().is_none_or(|s| s.matches(meta))
    }

    /// Whether a label or field selector narrows the result (the real server then omits
    /// `remainingItemCount`; kube-apiserver 1.36 does not count a shard selector here, so
    /// a sharded page's count is the whole collection's, as there).
    pub(crate) fn has_selectors(&self) -> bool {
        !self.labels.0.is_empty() || !self.fields.0.is_empty()
    }
}

/// Splits at commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl LabelSelector {
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(part).ok_or_else(|| {
                format!("unable to parse requirement: {part:?} in label selector {text:?}")
            })?);
        }
        Ok(Self(reqs))
    }

    fn matches(&self, meta: &Meta) -> bool {
        self.0.iter().all(|req| {
            let label = |k: &str| meta.labels.get(k).map(String::as_str);
            match req {
                Requirement::Equals(k, v) => label(k) == Some(v),
                Requirement::NotEquals(k, v) => label(k) != Some(v),
                Requirement::In(k, vs) => label(k).is_some_and(|l| vs.contains(l)),
                Requirement::NotIn(k, vs) => label(k).is_none_or(|l| !vs.contains(l)),
                Requirement::Exists(k) => label(k).is_some(),
                Requirement::NotExists(k) => label(k).is_none(),
            }
        })
    }
}

fn parse_requirement(part: &str) -> Option<Requirement> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key).then(|| Requirement::NotExists(key.to_owned()));
    }
    for (op, make) in [
        (
            "!=",
            Requirement::NotEquals as fn(String, String) -> Requirement,
        ),
        ("==", Requirement::Equals),
        ("=", Requirement::Equals),
    ] {
        if let Some((key, value)) = part.split_once(op) {
            let (key, value) = (key.trim(), value.trim());
            return (valid_key(key) && valid_value(value))
                .then(|| make(key.to_owned(), value.to_owned()));
        }
    }
    if let Some(open) = part.find('(') {
        let head = part[..open].trim();
        let values = part[open + 1..].strip_suffix(')')?;
        let (key, op) = head.rsplit_once(char::is_whitespace)?;
        let key = key.trim();
        let set: BTreeSet<String> = values
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect();
        if !valid_key(key) || !set.iter().all(|v| valid_value(v)) {
            return None;
        }
        return match op {
            "in" => Some(Requirement::In(key.to_owned(), set)),
            "notin" => Some(Requirement::NotIn(key.to_owned(), set)),
            _ => None,
        };
    }
    valid_key(part).then(|| Requirement::Exists(part.to_owned()))
}

impl FieldSelector {
    /// Parses `text`; `supported` says which field paths the resource can select on.
    pub(crate) fn parse(text: &str, supported: impl Fn(&str) -> bool) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, value, equal) = if let Some((p, v)) = part.split_once("!=") {
                (p, v, false)
            } else if let Some((p, v)) = part.split_once("==") {
                (p, v, true)
            } else if let Some((p, v)) = part.split_once('=') {
                (p, v, true)
            } else {
                return Err(format!(
                    "invalid selector: {part:?}; can't understand {part:?}"
                ));
            };
            let path = path.trim();
            if !supported(path) {
                return Err(format!("field label not supported: {path}"));
            }
            reqs.push((path.to_owned(), value.trim().to_owned(), equal));
        }
        Ok(Self(reqs))
    }

    fn matches(&self, meta: &Meta) -> bool {
        self.0
            .iter()
            .all(|(path, value, equal)| (meta.field(path) == Some(value.as_str())) == *equal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(labels: &[(&str, &str)]) -> Meta {
        Meta {
            name: "web".into(),
            namespace: Some("prod".into()),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            ..Default::default()
        }
    }

    fn sel(text: &str) -> LabelSelector {
        LabelSelector::parse(text).unwrap()
    }

    #[test]
    fn every_label_operator() {
        let m = meta(&[("app", "web"), ("tier", "front")]);
        for (text, expected) in [
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web, db)", true),
            ("app in (db)", false),
            ("app notin (db,cache)", true),
            ("missing notin (x)", true),
            ("app", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("app=web,tier in (front,back),!canary", true),
            ("app=web,tier=back", false),
            ("", true),
        ] {
            assert_eq!(sel(text).matches(&m), expected, "{text:?}");
        }
    }

    #[test]
    fn malformed_label_selectors_are_errors() {
        for bad in [
            "app in web",
            "app in (bad value!)",
            "=x",
            "a b c",
            "app=x y",
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn field_selectors_on_name_and_namespace() {
        let supported = |p: &str| p.starts_with("metadata.");
        let m = meta(&[]);
        let f = |t: &str| FieldSelector::parse(t, supported).unwrap().matches(&m);
        assert!(f("metadata.name=web"));
        assert!(f("metadata.namespace==prod,metadata.name!=db"));
        assert!(!f("metadata.name=db"));
        let err = FieldSelector::parse("spec.foo=x", supported).unwrap_err();
        assert_eq!(err, "field label not supported: spec.foo");
    }
}

//! `shardSelector` (KEP-5866, kube-apiserver 1.36 with `--feature-gates=ShardedListAndWatch=true`):
//! `shardRange(object.metadata.uid, '0x…', '0x…')` (or over `object.metadata.namespace`),
//! several joined with `||`, each range `[start, end)` over the FNV-1a 64 hash of the
//! field's string. Parsed and matched as kube-apiserver's `sharding` packages do: bounds of
//! exactly 16 lowercase hex digits after `0x` (or `0x10000000000000000`, 2^64), start below
//! end, one field for every range; a malformed selector is a 500 `invalid shard selector:
//! …` (the real server does not turn it into a 400). Lists echo the selector, normalised,
//! in `metadata.shardInfo.selector`; watch events carry nothing.

use crate::meta::Meta;

/// The field a selector hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Uid,
    Namespace,
}

impl Field {
    fn path(self) -> &'static str {
        match self {
            Field::Uid => "object.metadata.uid",
            Field::Namespace => "object.metadata.namespace",
        }
    }
}

/// A parsed `shardSelector`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardSelector {
    field: Field,
    /// `[start, end)`, with the bounds' text as given (normalised already).
    ranges: Vec<(u128, u128)>,
}

/// FNV-1a 64 over `value`'s bytes (kube's `sharding.HashField`).
pub(crate) fn hash(value: &str) -> u64 {
    value.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl ShardSelector {
    /// Parses `text` (not empty: an empty parameter is no selector).
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err(
                "empty shard selector is not allowed; omit the parameter for unfiltered lists"
                    .into(),
            );
        }
        let mut field = None;
        let mut ranges = Vec::new();
        for part in split_outside_quotes(text, "||") {
            let (this, start, end) = parse_range(part.trim())?;
            match field {
                Some(f) if f != this => {
                    return Err(format!(
                        "all shard ranges must use the same field, got {:?} and {:?}",
                        Field::path(f),
                        this.path()
                    ));
                }
                _ => field = Some(this),
            }
            ranges.push((start, end));
        }
        Ok(Self {
            field: field.expect("at least one range"),
            ranges,
        })
    }

    /// Whether the object falls in one of the ranges.
    pub(crate) fn matches(&self, meta: &Meta) -> bool {
        let value = match self.field {
            Field::Uid => meta.uid.as_str(),
            Field::Namespace => meta.namespace.as_deref().unwrap_or(""),
        };
        let h = u128::from(hash(value));
        self.ranges
            .iter()
            .any(|(start, end)| *start <= h && h < *end)
    }

    /// The selector as the server echoes it in `shardInfo.selector`.
    pub(crate) fn canonical(&self) -> String {
        let range = |(start, end): &(u128, u128)| {
            format!(
                "shardRange({}, '{}', '{}')",
                self.field.path(),
                hex(*start),
                hex(*end)
            )
        };
        let ranges: Vec<String> = self.ranges.iter().map(range).collect();
        ranges.join(" || ")
    }
}

fn hex(value: u128) -> String {
    format!("0x{value:016x}")
}

/// Splits `text` at `separator` where it is outside quotes.
fn split_outside_quotes<'a>(text: &'a str, separator: &str) -> Vec<&'a str> {
    let (mut parts, mut start, mut quote) = (Vec::new(), 0, None::<char>);
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if text[i..].starts_with(separator) => {
                parts.push(&text[start..i]);
                start = i + separator.len();
                for _ in 1..separator.len() {
                    chars.next();
                }
            }
            None => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// One `shardRange(field, 'start', 'end')`.
fn parse_range(call: &str) -> Result<(Field, u128, u128), String> {
    let open = call
        .find('(')
        .ok_or_else(|| format!("CEL parse error: expected a shardRange() call, got {call:?}"))?;
    let function = call[..open].trim();
    if function != "shardRange" {
        return Err(format!(
            "unsupported function {function:?}; only shardRange() and || are allowed"
        ));
    }
    let inner = call[open + 1..]
        .strip_suffix(')')
        .ok_or_else(|| format!("CEL parse error: unterminated call {call:?}"))?;
    let args = split_outside_quotes(inner, ",");
    if args.len() != 3 {
        return Err(format!(
            "shardRange() requires exactly 3 arguments, got {}",
            args.len()
        ));
    }
    let path: String = args[0].chars().filter(|c| !c.is_whitespace()).collect();
    let field = match path.as_str() {
        "object.metadata.uid" => Field::Uid,
        "object.metadata.namespace" => Field::Namespace,
        _ => {
            return Err(format!(
                "unsupported field path {path:?}; supported: object.metadata.uid, \
                 object.metadata.namespace"
            ));
        }
    };
    let start = bound("hexStart", args[1])?;
    let end = bound("hexEnd", args[2])?;
    if start >= end {
        return Err(format!(
            "shard range start {} must be less than end {}",
            hex(start),
            hex(end)
        ));
    }
    Ok((field, start, end))
}

/// A bound: a string literal of `0x` and exactly 16 lowercase hex digits, or 2^64.
fn bound(name: &str, literal: &str) -> Result<u128, String> {
    let literal = literal.trim();
    let text = ['\'', '"']
        .iter()
        .find_map(|q| literal.strip_prefix(*q)?.strip_suffix(*q))
        .ok_or_else(|| format!("{name} must be a string literal, got {literal}"))?;
    let digits = text
        .strip_prefix("0x")
        .ok_or_else(|| format!("{name} must have '0x' prefix, got {text:?}"))?;
    let lower_hex = !digits.is_empty()
        && digits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if text == "0x10000000000000000" {
        return Ok(1u128 << 64);
    }
    if lower_hex && digits.len() == 16 {
        return Ok(u128::from_str_radix(digits, 16).expect("16 hex digits"));
    }
    let hint = match lower_hex && digits.len() < 16 {
        true => format!(" (did you mean \"0x{digits:0>16}\"?)"),
        false => String::new(),
    };
    Err(format!(
        "{name} must be a 0x-prefixed 16-digit hex value, got {text:?}{hint}"
    ))
}

#[cfg(test)]
mod tests;

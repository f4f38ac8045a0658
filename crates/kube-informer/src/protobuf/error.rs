//! [`DecodeError`]: why a protobuf body could not be decoded, and where.

use std::fmt;

/// Why a protobuf body could not be decoded: what was wrong, and where.
///
/// One pointer wide: every field read returns a `Result` of it, and a small error keeps
/// those results in registers (decoding a pod reads hundreds of fields).
#[derive(Clone, PartialEq, Eq)]
pub struct DecodeError(Box<Detail>);

#[derive(Clone, PartialEq, Eq)]
struct Detail {
    offset: Option<usize>,
    path: Vec<&'static str>,
    message: String,
}

impl DecodeError {
    #[cold]
    pub(crate) fn at(offset: usize, message: String) -> Self {
        DecodeError(Box::new(Detail {
            offset: Some(offset),
            path: Vec::new(),
            message,
        }))
    }

    /// The error inside `name` (a field or message), for its path.
    pub(crate) fn within(mut self, name: &'static str) -> Self {
        self.0.path.push(name);
        self
    }

    /// The byte of the body where it went wrong, when known.
    pub fn offset(&self) -> Option<usize> {
        self.0.offset
    }
}

impl fmt::Debug for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecodeError")
            .field("offset", &self.0.offset)
            .field("path", &self.0.path)
            .field("message", &self.0.message)
            .finish()
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Detail {
            offset,
            path,
            message,
        } = &*self.0;
        if let Some(offset) = offset {
            write!(f, "at byte {offset}")?;
            if !path.is_empty() {
                f.write_str(" ")?;
            }
        }
        if !path.is_empty() {
            let path: Vec<&str> = path.iter().rev().copied().collect();
            write!(f, "in {}", path.join("."))?;
        }
        if offset.is_some() || !path.is_empty() {
            f.write_str(": ")?;
        }
        f.write_str(message)
    }
}

impl std::error::Error for DecodeError {}

impl serde::de::Error for DecodeError {
    #[cold]
    fn custom<T: fmt::Display>(message: T) -> Self {
        DecodeError(Box::new(Detail {
            offset: None,
            path: Vec::new(),
            message: message.to_string(),
        }))
    }
}

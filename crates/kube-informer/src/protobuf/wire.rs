//! The protobuf wire format, read without copying: varints, tags and length-delimited
//! fields, each failure a [`DecodeError`] that says what was cut or wrong, and where.

use kube_protobuf_schema::Ty;

use super::DecodeError;

/// How a field's value is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireType {
    Varint,
    Fixed64,
    Len,
    Fixed32,
}

/// One field as found in a message: its number and its raw value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawField<'de> {
    pub(crate) number: u32,
    pub(crate) value: RawValue<'de>,
}

/// A field's value before the schema says what it is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RawValue<'de> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(&'de [u8]),
}

impl RawValue<'_> {
    pub(crate) fn wire_type(&self) -> WireType {
        match self {
            RawValue::Varint(_) => WireType::Varint,
            RawValue::Fixed64(_) => WireType::Fixed64,
            RawValue::Fixed32(_) => WireType::Fixed32,
            RawValue::Len(_) => WireType::Len,
        }
    }
}

/// Reads the fields of one message in order. `base` is the message's offset in the whole
/// body, for errors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'de> {
    buf: &'de [u8],
    pos: usize,
    base: usize,
}

impl<'de> Reader<'de> {
    pub(crate) fn new(buf: &'de [u8], base: usize) -> Self {
        Reader { buf, pos: 0, base }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// The offset of the next field in the whole body.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// The body offset of `slice`, a value this reader returned.
    pub(crate) fn offset_of(&self, slice: &[u8]) -> usize {
        let within = (slice.as_ptr() as usize).saturating_sub(self.buf.as_ptr() as usize);
        self.base + within.min(self.buf.len())
    }

    /// The next field, or `None` at the end of the message.
    pub(crate) fn next_field(&mut self) -> Result<Option<RawField<'de>>, DecodeError> {
        if self.is_empty() {
            return Ok(None);
        }
        let at = self.offset();
        let key = self.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n > 0 && *n < (1 << 29))
            .ok_or_else(|| {
                DecodeError::at(at, format!("field number {} out of range", key >> 3))
            })?;
        let value = match key & 7 {
            0 => RawValue::Varint(self.varint()?),
            1 => RawValue::Fixed64(u64::from_le_bytes(self.take_array::<8>()?)),
            2 => {
                let len = self.varint()?;
                let remaining = self.buf.len() - self.pos;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|l| *l <= remaining)
                    .ok_or_else(|| {
                        DecodeError::at(
                            at,
                            format!("field {number} claims {len} bytes, {remaining} remain"),
                        )
                    })?;
                let value = &self.buf[self.pos..self.pos + len];
                self.pos += len;
                RawValue::Len(value)
            }
            5 => RawValue::Fixed32(u32::from_le_bytes(self.take_array::<4>()?)),
            other => {
                return Err(DecodeError::at(
                    at,
                    format!(
                        "field {number} has wire type {other}, which protobuf 2 and 3 do not use"
                    ),
                ));
            }
        };
        Ok(Some(RawField { number, value }))
    }

    /// The next field if it has `number`, without consuming anything otherwise.
    pub(crate) fn next_if(&mut self, number: u32) -> Result<Option<RawField<'de>>, DecodeError> {
        let mut ahead = *self;
        match ahead.next_field()? {
            Some(field) if field.number == number => {
                *self = ahead;
                Ok(Some(field))
            }
            _ => Ok(None),
        }
    }

    /// The next number of a packed run of `ty`s.
    pub(crate) fn next_packed(&mut self, ty: Ty) -> Result<RawValue<'de>, DecodeError> {
        Ok(match ty {
            Ty::Double => RawValue::Fixed64(u64::from_le_bytes(self.take_array::<8>()?)),
            Ty::Float => RawValue::Fixed32(u32::from_le_bytes(self.take_array::<4>()?)),
            _ => RawValue::Varint(self.varint()?),
        })
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        // Most varints (tags, lengths under 128, small numbers) are one byte.
        if let Some(&byte) = self.buf.get(self.pos)
            && byte < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(byte));
        }
        self.long_varint()
    }

    fn long_varint(&mut self) -> Result<u64, DecodeError> {
        let at = self.offset();
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(DecodeError::at(at, "a varint is cut short".to_owned()));
            };
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(DecodeError::at(at, "a varint overflows 64 bits".to_owned()));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::at(
            at,
            "a varint is longer than 10 bytes".to_owned(),
        ))
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let at = self.offset();
        let bytes = self
            .buf
            .get(self.pos..self.pos + N)
            .ok_or_else(|| DecodeError::at(at, format!("a {N}-byte value is cut short")))?;
        self.pos += N;
        Ok(bytes.try_into().expect("N bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_every_wire_type_are_read() {
        // 1: varint 150, 2: "hi", 3: fixed64 1, 4: fixed32 2
        let buf = [
            0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x19, 1, 0, 0, 0, 0, 0, 0, 0, 0x25, 2, 0, 0,
            0,
        ];
        let mut reader = Reader::new(&buf, 0);
        let mut seen = Vec::new();
        while let Some(field) = reader.next_field().unwrap() {
            seen.push((field.number, format!("{:?}", field.value)));
        }
        assert_eq!(seen[0], (1, "Varint(150)".to_owned()));
        assert_eq!(seen[1], (2, "Len([104, 105])".to_owned()));
        assert_eq!(seen[2], (3, "Fixed64(1)".to_owned()));
        assert_eq!(seen[3], (4, "Fixed32(2)".to_owned()));
    }

    #[test]
    fn a_cut_or_oversized_field_is_an_error_that_says_where() {
        let claims_too_much = [0x12, 0x05, b'a'];
        let error = Reader::new(&claims_too_much, 10).next_field().unwrap_err();
        assert_eq!(
            error.to_string(),
            "at byte 10: field 2 claims 5 bytes, 1 remain"
        );
        let cut_varint = [0x08, 0x96];
        let error = Reader::new(&cut_varint, 0).next_field().unwrap_err();
        assert!(error.to_string().contains("cut short"), "{error}");
        let group = [0x0b];
        let error = Reader::new(&group, 0).next_field().unwrap_err();
        assert!(error.to_string().contains("wire type 3"), "{error}");
    }
}

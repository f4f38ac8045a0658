//! Protobuf's wire format, as much as Kubernetes' messages use: varints, and
//! length-delimited fields (strings, bytes, messages); fixed-width fields only for reading.

/// Appends `value` as a varint.
pub(crate) fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a varint field.
pub(crate) fn varint_field(out: &mut Vec<u8>, number: u32, value: u64) {
    varint(out, u64::from(number) << 3);
    varint(out, value);
}

/// Appends a length-delimited field.
pub(crate) fn len_field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, (u64::from(number) << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a length-delimited field whose bytes `write` appends.
pub(crate) fn nested<E>(
    out: &mut Vec<u8>,
    number: u32,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    let mut inner = Vec::new();
    write(&mut inner)?;
    len_field(out, number, &inner);
    Ok(())
}

/// A field's value, as read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Raw<'a> {
    Varint(u64),
    Fixed64(u64),
    Len(&'a [u8]),
    Fixed32(u32),
}

/// Reads fields from a message's bytes.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .buf
                .split_first()
                .ok_or("the body ends inside a varint")?;
            self.buf = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err("a varint longer than 10 bytes".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.buf.len() {
            return Err(format!(
                "a length of {n} with {} bytes left",
                self.buf.len()
            ));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The next field's number and value, `None` at the end.
    pub(crate) fn next(&mut self) -> Result<Option<(u32, Raw<'a>)>, String> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| "a field number out of range")?;
        let value = match key & 7 {
            0 => Raw::Varint(self.varint()?),
            1 => Raw::Fixed64(u64::from_le_bytes(
                self.take(8)?.try_into().expect("8 bytes"),
            )),
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| "a length out of range")?;
                Raw::Len(self.take(len)?)
            }
            5 => Raw::Fixed32(u32::from_le_bytes(
                self.take(4)?.try_into().expect("4 bytes"),
            )),
            other => return Err(format!("field {number} has wire type {other}")),
        };
        Ok(Some((number, value)))
    }

    /// The varints of a packed run.
    pub(crate) fn packed(bytes: &'a [u8]) -> Result<Vec<u64>, String> {
        let mut reader = Reader::new(bytes);
        let mut out = Vec::new();
        while !reader.buf.is_empty() {
            out.push(reader.varint()?);
        }
        Ok(out)
    }
}

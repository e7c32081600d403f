//! Protocol buffers wire format: the few primitives both our codecs need
//! (varints, length-delimited fields, fixed64 doubles) and a field reader.

/// Wire type of a varint field.
pub const VARINT: u8 = 0;
/// Wire type of a 64-bit fixed field (doubles).
pub const FIXED64: u8 = 1;
/// Wire type of a length-delimited field (strings, bytes, messages, packed lists).
pub const LEN: u8 = 2;
/// Wire type of a 32-bit fixed field (floats).
pub const FIXED32: u8 = 5;

/// Appends a base-128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a field key.
pub fn put_key(out: &mut Vec<u8>, tag: u32, wire: u8) {
    put_varint(out, (u64::from(tag) << 3) | u64::from(wire));
}

/// Appends a varint field (negative int32/int64 are sign-extended, as protobuf does).
pub fn put_int(out: &mut Vec<u8>, tag: u32, v: i64) {
    put_key(out, tag, VARINT);
    put_varint(out, v as u64);
}

/// Appends a bool field.
pub fn put_bool(out: &mut Vec<u8>, tag: u32, v: bool) {
    put_int(out, tag, i64::from(v));
}

/// Appends a double field.
pub fn put_double(out: &mut Vec<u8>, tag: u32, v: f64) {
    put_key(out, tag, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a length-delimited field.
pub fn put_bytes(out: &mut Vec<u8>, tag: u32, b: &[u8]) {
    put_key(out, tag, LEN);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Appends a string field.
pub fn put_str(out: &mut Vec<u8>, tag: u32, s: &str) {
    put_bytes(out, tag, s.as_bytes());
}

/// Appends an embedded message written by `f`, length-prefixed in place.
pub fn put_msg(out: &mut Vec<u8>, tag: u32, f: impl FnOnce(&mut Vec<u8>)) {
    put_key(out, tag, LEN);
    // Reserve one length byte (most messages are short), then fix it up.
    let len_at = out.len();
    out.push(0);
    let start = out.len();
    f(out);
    let len = out.len() - start;
    if len < 0x80 {
        out[len_at] = len as u8;
    } else {
        let mut prefix = Vec::with_capacity(5);
        put_varint(&mut prefix, len as u64);
        out.splice(len_at..start, prefix);
    }
}

/// One decoded field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Field<'a> {
    /// A varint (ints, bools).
    Varint(u64),
    /// Eight little-endian bytes (doubles).
    Fixed64(u64),
    /// Four little-endian bytes (floats).
    Fixed32(u32),
    /// Length-delimited bytes (strings, bytes, messages, packed lists).
    Bytes(&'a [u8]),
}

/// A malformed protobuf message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads the fields of one message in order.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Reads a varint at the cursor.
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(DecodeError("unexpected end of varint".into()));
            };
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(DecodeError("varint overflows 64 bits".into()))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len());
        let Some(end) = end else {
            return Err(DecodeError("field runs past the end of the message".into()));
        };
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// The next `(tag, field)`, or `None` at the end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(u32, Field<'a>)>, DecodeError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let tag = u32::try_from(key >> 3).map_err(|_| DecodeError("field number out of range".into()))?;
        if tag == 0 {
            return Err(DecodeError("field number 0".into()));
        }
        let field = match (key & 7) as u8 {
            VARINT => Field::Varint(self.varint()?),
            FIXED64 => {
                let b = self.take(8)?;
                Field::Fixed64(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
            }
            LEN => {
                let n = usize::try_from(self.varint()?).map_err(|_| DecodeError("length out of range".into()))?;
                Field::Bytes(self.take(n)?)
            }
            FIXED32 => {
                let b = self.take(4)?;
                Field::Fixed32(u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
            }
            w => return Err(DecodeError(format!("unsupported wire type {w}"))),
        };
        Ok(Some((tag, field)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_fields() {
        let mut out = Vec::new();
        put_int(&mut out, 1, -1);
        put_str(&mut out, 2, "hi");
        put_msg(&mut out, 3, |m| put_bytes(m, 1, &[7u8; 200]));
        put_double(&mut out, 4, 1.5);
        let mut r = Reader::new(&out);
        assert_eq!(r.next().unwrap(), Some((1, Field::Varint(u64::MAX))));
        assert_eq!(r.next().unwrap(), Some((2, Field::Bytes(b"hi"))));
        let Some((3, Field::Bytes(inner))) = r.next().unwrap() else { panic!("message") };
        let mut ir = Reader::new(inner);
        assert_eq!(ir.next().unwrap(), Some((1, Field::Bytes(&[7u8; 200][..]))));
        assert_eq!(r.next().unwrap(), Some((4, Field::Fixed64(1.5f64.to_bits()))));
        assert_eq!(r.next().unwrap(), None);
        assert!(Reader::new(&[0x0a, 5, 1]).next().is_err(), "truncated");
    }
}

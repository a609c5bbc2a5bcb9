//! A bounds-checked little-endian reader over the file's bytes: every read checks
//! its length against what is left before touching (or allocating for) anything.

use super::error::{GgufError, Result};

/// Reads fields front to back; `pos` is an offset into the whole file.
#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at byte `pos` of `buf` (`pos <= buf.len()`).
    pub(crate) fn at(buf: &'a [u8], pos: usize) -> Self {
        Cursor {
            buf,
            pos: pos.min(buf.len()),
        }
    }

    /// The offset of the next byte.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes read since offset `start`.
    pub(crate) fn since(&self, start: usize) -> &'a [u8] {
        &self.buf[start.min(self.pos)..self.pos]
    }

    /// Bytes left.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes, or `Truncated` naming `what`.
    pub(crate) fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8]> {
        let available = self.remaining();
        match usize::try_from(n) {
            Ok(len) if len <= available => {
                let bytes = &self.buf[self.pos..self.pos + len];
                self.pos += len;
                Ok(bytes)
            }
            _ => Err(GgufError::Truncated {
                what,
                offset: self.pos as u64,
                needed: n,
                available: available as u64,
            }),
        }
    }

    /// The next `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let bytes = self.take(N as u64, what)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A GGUF string: a u64 length, then that many bytes.
    pub(crate) fn string(&mut self, what: &'static str) -> Result<&'a [u8]> {
        let len = self.u64(what)?;
        self.take(len, what)
    }

    /// A GGUF string that must be UTF-8 (keys and tensor names).
    pub(crate) fn utf8(&mut self, what: &'static str) -> Result<&'a str> {
        let bytes = self.string(what)?;
        std::str::from_utf8(bytes).map_err(|_| GgufError::InvalidUtf8 {
            what,
            offset: (self.pos - bytes.len()) as u64,
        })
    }

    /// A count of items each at least `min_size` bytes long, checked against the bytes
    /// left so that no loop or allocation is ever sized by a forged count.
    pub(crate) fn count(&mut self, what: &'static str, min_size: usize) -> Result<u64> {
        let offset = self.pos as u64;
        let count = self.u64(what)?;
        if count > (self.remaining() / min_size) as u64 {
            return Err(GgufError::CountTooLarge {
                what,
                offset,
                count,
                available: self.remaining() as u64,
            });
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_check_lengths() {
        let buf = [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, b'a'];
        let mut c = Cursor::at(&buf, 0);
        assert_eq!(c.u32("x").unwrap(), 1);
        assert_eq!(c.pos(), 4);
        // A string of length 2 with one byte left.
        let err = c.string("key").unwrap_err();
        assert!(matches!(
            err,
            GgufError::Truncated {
                what: "key",
                offset: 12,
                needed: 2,
                available: 1
            }
        ));
        let mut c = Cursor::at(&buf, 4);
        assert!(matches!(
            c.count("tensor", 24),
            Err(GgufError::CountTooLarge {
                count: 2,
                available: 1,
                ..
            })
        ));
        let mut c = Cursor::at(&buf, 0);
        assert!(c.take(u64::MAX, "huge").is_err());
        assert_eq!(c.pos(), 0);
    }
}

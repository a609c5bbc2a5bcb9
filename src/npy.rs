//! A small, strict `.npy` reader and writer (NumPy format versions 1.0, 2.0, 3.0),
//! used by the CLI and the tests.
//!
//! Only little-endian, C-order arrays of the dtypes dq uses that NumPy has
//! (`i1 u1 i4 i8 f2 f4 f8`). The header's declared size is checked against the file
//! size before anything is allocated, so a forged header cannot cause a huge allocation.
//!
//! ```
//! use dq::{DType, npy};
//! let file = npy::encode(DType::F32, &[2], &[0, 0, 128, 63, 0, 0, 0, 64]).unwrap();
//! let path = std::env::temp_dir().join(format!("dq-npy-doc-{}.npy", std::process::id()));
//! std::fs::write(&path, &file).unwrap();
//! let a = npy::read(&path)?;
//! std::fs::remove_file(&path).unwrap();
//! assert_eq!((a.dtype, a.shape), (DType::F32, vec![2]));
//! assert_eq!(a.data, [0, 0, 128, 63, 0, 0, 0, 64]);
//! # Ok::<(), npy::Error>(())
//! ```

use std::io::Read;
use std::path::Path;

use crate::DType;

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Longest header accepted (NumPy itself writes a few hundred bytes).
const MAX_HEADER: usize = 1 << 16;

/// What is wrong with a `.npy` file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the file failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Fewer than the 8 bytes of magic string and version.
    #[error("file too short for the magic string")]
    TooShort,
    /// The file does not start with `\x93NUMPY`.
    #[error("missing the \\x93NUMPY magic string")]
    Magic,
    /// The file ends inside the header length.
    #[error("truncated header length")]
    TruncatedHeaderLength,
    /// A format version other than 1.0, 2.0 or 3.0.
    #[error("unsupported format version {major}.{minor}")]
    Version {
        /// Major version byte.
        major: u8,
        /// Minor version byte.
        minor: u8,
    },
    /// A header longer than the file (or than 64 KiB).
    #[error("header length {len} does not fit the file ({file_len} bytes)")]
    HeaderLength {
        /// Declared header length.
        len: usize,
        /// File size.
        file_len: u64,
    },
    /// A header that is not UTF-8.
    #[error("header is not text")]
    HeaderNotText,
    /// A header dict that does not parse.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// A shape whose element count overflows.
    #[error("shape {shape:?} overflows")]
    ShapeOverflow {
        /// The declared shape.
        shape: Vec<usize>,
    },
    /// Data bytes that differ from what the header declares.
    #[error("header declares {dtype}{shape:?} = {declared} data bytes, the file holds {held}")]
    DataSize {
        /// Declared dtype.
        dtype: DType,
        /// Declared shape.
        shape: Vec<usize>,
        /// Bytes the header declares.
        declared: usize,
        /// Bytes after the header.
        held: u64,
    },
}

/// What is wrong with a header dict (`{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// A `descr` dq does not read.
    #[error("unsupported dtype descr '{0}'")]
    Descr(String),
    /// A multi-byte `descr` that is not little-endian.
    #[error("unsupported dtype descr '{0}' (only little-endian is supported)")]
    ByteOrder(String),
    /// A key other than `descr`, `fortran_order` and `shape`.
    #[error("unexpected header key '{0}'")]
    UnexpectedKey(String),
    /// One of the three keys is absent.
    #[error("header has no '{0}'")]
    MissingKey(&'static str),
    /// `fortran_order: True`.
    #[error("Fortran-order arrays are not supported")]
    FortranOrder,
    /// Text after the closing brace.
    #[error("trailing text after the header dict")]
    TrailingText,
    /// A punctuation character was expected.
    #[error("expected '{expected}' at header byte {at}")]
    Expected {
        /// The character.
        expected: char,
        /// Byte offset in the header.
        at: usize,
    },
    /// A quoted string was expected.
    #[error("expected a string at header byte {0}")]
    ExpectedString(usize),
    /// A string without its closing quote.
    #[error("unterminated string in header")]
    UnterminatedString,
    /// `True` or `False` was expected.
    #[error("expected True or False at header byte {0}")]
    ExpectedBool(usize),
    /// A shape entry that is not a non-negative integer.
    #[error("bad shape entry at header byte {0}")]
    ShapeEntry(usize),
}

/// A loaded array: dtype, shape and raw little-endian data.
#[derive(Debug)]
pub struct Npy {
    /// Element type.
    pub dtype: DType,
    /// Shape (empty for a 0-d array).
    pub shape: Vec<usize>,
    /// The data bytes.
    pub data: Vec<u8>,
}

/// The NumPy `descr` of a dtype, `None` where NumPy has no such type.
pub fn descr(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::S8 => "|i1",
        DType::U8 => "|u1",
        DType::S32 => "<i4",
        DType::S64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        _ => return None,
    })
}

fn parse_descr(d: &str) -> Result<DType, HeaderError> {
    let (order, code) = d.split_at(d.len().min(1));
    let dtype = match code {
        "i1" => DType::S8,
        "u1" => DType::U8,
        "i4" => DType::S32,
        "i8" => DType::S64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => return Err(HeaderError::Descr(d.into())),
    };
    let one_byte = matches!(dtype, DType::S8 | DType::U8);
    match order {
        "<" => Ok(dtype),
        "|" | "=" if one_byte => Ok(dtype),
        _ => Err(HeaderError::ByteOrder(d.into())),
    }
}

/// Reads a `.npy` file.
///
/// # Errors
/// [`Error::Io`] when the file cannot be read, another [`Error`] naming what is wrong
/// with its contents.
pub fn read(path: &Path) -> Result<Npy, Error> {
    let mut f = crate::formats::input::open(path)?;
    let file_len = f.metadata()?.len();
    let mut pre = [0u8; 8];
    f.read_exact(&mut pre).map_err(|_| Error::TooShort)?;
    if &pre[..6] != MAGIC {
        return Err(Error::Magic);
    }
    let hlen = match pre[6] {
        1 => {
            let mut b = [0u8; 2];
            f.read_exact(&mut b)
                .map_err(|_| Error::TruncatedHeaderLength)?;
            u16::from_le_bytes(b) as usize
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            f.read_exact(&mut b)
                .map_err(|_| Error::TruncatedHeaderLength)?;
            u32::from_le_bytes(b) as usize
        }
        major => {
            return Err(Error::Version {
                major,
                minor: pre[7],
            });
        }
    };
    let prefix = if pre[6] == 1 { 10 } else { 12 };
    if hlen > MAX_HEADER || (prefix + hlen) as u64 > file_len {
        return Err(Error::HeaderLength {
            len: hlen,
            file_len,
        });
    }
    let mut header = vec![0u8; hlen];
    f.read_exact(&mut header)?;
    let header = std::str::from_utf8(&header).map_err(|_| Error::HeaderNotText)?;
    let (dtype, shape) = parse_header(header)?;
    let Some(declared) = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .and_then(|n| dtype.bytes_for(n))
    else {
        return Err(Error::ShapeOverflow { shape });
    };
    let held = file_len - (prefix + hlen) as u64;
    if declared as u64 != held {
        return Err(Error::DataSize {
            dtype,
            shape,
            declared,
            held,
        });
    }
    let mut data = vec![0u8; declared];
    f.read_exact(&mut data)?;
    Ok(Npy { dtype, shape, data })
}

/// Encodes `data` (raw little-endian `dtype`) as a `.npy` file of `shape`.
/// `None` when NumPy has no such dtype.
pub fn encode(dtype: DType, shape: &[usize], data: &[u8]) -> Option<Vec<u8>> {
    Some(with_header(&header(descr(dtype)?, shape), data))
}

/// The header dict NumPy writes for `descr` and `shape`, e.g.
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
pub fn header(descr: &str, shape: &[usize]) -> String {
    let shape_txt = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_txt}, }}")
}

/// A version 1.0 `.npy` file holding `header` (any text, padded with spaces and a
/// newline to 64 bytes as NumPy pads it) and `data`. Writes headers [`encode`] would
/// not (other byte orders, forged shapes); `header` must be shorter than 64 KiB.
pub fn with_header(header: &str, data: &[u8]) -> Vec<u8> {
    let mut header = header.to_string();
    // Magic (6) + version (2) + length (2) + header + '\n', padded to 64 bytes.
    let total = (10 + header.len() + 1).next_multiple_of(64);
    while 10 + header.len() + 1 < total {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(total + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// Parses the header dict: `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
fn parse_header(h: &str) -> Result<(DType, Vec<usize>), HeaderError> {
    let mut p = Parser {
        s: h.as_bytes(),
        i: 0,
    };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    p.expect(b'{')?;
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.expect(b':')?;
        match key.as_str() {
            "descr" => descr = Some(p.string()?),
            "fortran_order" => fortran = Some(p.boolean()?),
            "shape" => shape = Some(p.tuple()?),
            _ => return Err(HeaderError::UnexpectedKey(key)),
        }
        p.ws();
        if !p.eat(b',') {
            p.expect(b'}')?;
            break;
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err(HeaderError::TrailingText);
    }
    let descr = descr.ok_or(HeaderError::MissingKey("descr"))?;
    let shape = shape.ok_or(HeaderError::MissingKey("shape"))?;
    if fortran.ok_or(HeaderError::MissingKey("fortran_order"))? {
        return Err(HeaderError::FortranOrder);
    }
    Ok((parse_descr(&descr)?, shape))
}

/// A cursor over the header text.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        let hit = self.s.get(self.i) == Some(&c);
        self.i += hit as usize;
        hit
    }

    fn expect(&mut self, c: u8) -> Result<(), HeaderError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(HeaderError::Expected {
                expected: c as char,
                at: self.i,
            })
        }
    }

    fn string(&mut self) -> Result<String, HeaderError> {
        self.ws();
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(HeaderError::ExpectedString(self.i)),
        };
        let start = self.i + 1;
        let len = self.s[start..]
            .iter()
            .position(|&c| c == q)
            .ok_or(HeaderError::UnterminatedString)?;
        self.i = start + len + 1;
        Ok(String::from_utf8_lossy(&self.s[start..start + len]).into_owned())
    }

    fn boolean(&mut self) -> Result<bool, HeaderError> {
        self.ws();
        for (word, v) in [("True", true), ("False", false)] {
            if self.s[self.i..].starts_with(word.as_bytes()) {
                self.i += word.len();
                return Ok(v);
            }
        }
        Err(HeaderError::ExpectedBool(self.i))
    }

    fn tuple(&mut self) -> Result<Vec<usize>, HeaderError> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            if self.eat(b')') {
                return Ok(dims);
            }
            self.ws();
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                self.i += 1;
            }
            let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
            let d = digits
                .parse::<usize>()
                .map_err(|_| HeaderError::ShapeEntry(start))?;
            self.eat(b'L'); // Python 2 long suffix
            dims.push(d);
            if !self.eat(b',') {
                self.expect(b')')?;
                return Ok(dims);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        for shape in [vec![], vec![3], vec![2, 0, 5]] {
            let n: usize = shape.iter().product();
            let bytes = encode(DType::F32, &shape, &vec![0u8; n * 4]).unwrap();
            assert_eq!(
                (10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize) % 64,
                0
            );
            let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            let h = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
            assert_eq!(parse_header(h).unwrap(), (DType::F32, shape));
        }
        assert!(encode(DType::BF16, &[1], &[0, 0]).is_none());
    }

    /// A `.npy` file of format version `major`.0 written here byte by byte (not by
    /// [`with_header`]): a 4-byte header length from version 2 on, the header padded
    /// with spaces and a newline to a multiple of 64 bytes.
    fn versioned(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
        let prefix = if major == 1 { 10 } else { 12 };
        let mut h = header.as_bytes().to_vec();
        while !(prefix + h.len() + 1).is_multiple_of(64) {
            h.push(b' ');
        }
        h.push(b'\n');
        let mut f = b"\x93NUMPY".to_vec();
        f.extend([major, 0]);
        if major == 1 {
            f.extend((h.len() as u16).to_le_bytes());
        } else {
            f.extend((h.len() as u32).to_le_bytes());
        }
        f.extend(h);
        f.extend(data);
        f
    }

    fn read_bytes(file: &[u8]) -> Result<Npy, Error> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.npy");
        std::fs::write(&path, file).unwrap();
        read(&path)
    }

    #[test]
    fn versions_1_2_and_3_round_trip_every_dtype() {
        let dtypes = [
            DType::S8,
            DType::U8,
            DType::S32,
            DType::S64,
            DType::F16,
            DType::F32,
            DType::F64,
        ];
        for dtype in dtypes {
            for shape in [vec![], vec![3], vec![2, 0, 5], vec![2, 3]] {
                let n: usize = shape.iter().product();
                let data: Vec<u8> = (0..dtype.bytes_for(n).unwrap())
                    .map(|i| (i * 29 + 7) as u8)
                    .collect();
                let h = header(descr(dtype).unwrap(), &shape);
                for major in [1, 2, 3] {
                    let f = versioned(major, &h, &data);
                    let got = read_bytes(&f).unwrap_or_else(|e| panic!("v{major} {h}: {e}"));
                    assert_eq!(
                        (got.dtype, &got.shape, &got.data),
                        (dtype, &shape, &data),
                        "v{major} {h}"
                    );
                }
            }
        }
    }

    #[test]
    fn version_2_header_longer_than_a_u16_length() {
        // Version 2.0 exists for headers a u16 cannot measure; up to MAX_HEADER.
        let h = format!("{}{}", header("<f4", &[2]), " ".repeat(65_000));
        let data = [0u8, 0, 0x80, 0x3f, 0, 0, 0, 0x40];
        let got = read_bytes(&versioned(2, &h, &data)).unwrap();
        assert_eq!(
            (got.dtype, got.shape, got.data),
            (DType::F32, vec![2], data.to_vec())
        );
        let long = format!("{}{}", header("<f4", &[2]), " ".repeat(MAX_HEADER));
        let err = read_bytes(&versioned(2, &long, &data)).unwrap_err();
        assert!(matches!(err, Error::HeaderLength { .. }), "{err}");
    }

    #[test]
    fn version_3_header_is_utf8() {
        // Version 3.0 headers are UTF-8: a non-ASCII key is decoded, then refused
        // as the unexpected key it is.
        let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'é': 1}";
        let err = read_bytes(&versioned(3, h, &[0; 4])).unwrap_err();
        assert!(
            matches!(&err, Error::Header(HeaderError::UnexpectedKey(k)) if k == "é"),
            "{err}"
        );
        // Bytes that are not UTF-8 are not a header.
        let mut f = versioned(3, &header("<f4", &[1]), &[0; 4]);
        f[14] = 0xff;
        let err = read_bytes(&f).unwrap_err();
        assert!(matches!(err, Error::HeaderNotText), "{err}");
        // A version 4.0 file is refused, naming its version.
        let mut f = versioned(3, &header("<f4", &[1]), &[0; 4]);
        f[6] = 4;
        let err = read_bytes(&f).unwrap_err();
        assert!(
            matches!(err, Error::Version { major: 4, minor: 0 }),
            "{err}"
        );
    }

    #[test]
    fn numpy_style_headers_parse() {
        let h = "{'descr': '|u1', 'fortran_order': False, 'shape': (4L,), }   \n";
        assert_eq!(parse_header(h).unwrap(), (DType::U8, vec![4]));
        let h = "{\"shape\": (), \"descr\": \"<f8\", \"fortran_order\": False}";
        assert_eq!(parse_header(h).unwrap(), (DType::F64, vec![]));
        assert!(parse_header("{'descr': '>f4', 'fortran_order': False, 'shape': ()}").is_err());
        assert!(parse_header("{'descr': '<f4', 'fortran_order': True, 'shape': ()}").is_err());
        assert!(parse_header("{'descr': '<f4', 'shape': ()}").is_err());
        assert!(parse_header("{'descr': '<c8', 'fortran_order': False, 'shape': ()}").is_err());
        assert!(parse_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}").is_err());
    }
}

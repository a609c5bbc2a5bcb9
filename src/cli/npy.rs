//! A small, strict `.npy` reader and writer (NumPy format versions 1.0, 2.0, 3.0).
//!
//! Only little-endian, C-order arrays of the dtypes dq uses that NumPy has
//! (`i1 u1 i4 i8 f2 f4 f8`). The header's declared size is checked against the file
//! size before anything is allocated, so a forged header cannot cause a huge allocation.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use dq::DType;

use super::error::CliError;

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Longest header accepted (NumPy itself writes a few hundred bytes).
const MAX_HEADER: usize = 1 << 16;

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

fn parse_descr(d: &str) -> Result<DType, String> {
    let (order, code) = d.split_at(d.len().min(1));
    let dtype = match code {
        "i1" => DType::S8,
        "u1" => DType::U8,
        "i4" => DType::S32,
        "i8" => DType::S64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => return Err(format!("unsupported dtype descr '{d}'")),
    };
    let one_byte = matches!(dtype, DType::S8 | DType::U8);
    match order {
        "<" => Ok(dtype),
        "|" | "=" if one_byte => Ok(dtype),
        _ => Err(format!(
            "unsupported dtype descr '{d}' (only little-endian is supported)"
        )),
    }
}

/// Reads a `.npy` file.
///
/// # Errors
/// [`CliError::Io`] or [`CliError::Npy`] naming what is wrong.
pub fn read(path: &Path) -> Result<Npy, CliError> {
    let io = |source| CliError::Io {
        path: path.to_owned(),
        source,
    };
    let bad = |reason: String| CliError::Npy {
        path: path.to_owned(),
        reason,
    };
    let mut f = File::open(path).map_err(io)?;
    let file_len = f.metadata().map_err(io)?.len();
    let mut pre = [0u8; 8];
    f.read_exact(&mut pre)
        .map_err(|_| bad("file too short for the magic string".into()))?;
    if &pre[..6] != MAGIC {
        return Err(bad("missing the \\x93NUMPY magic string".into()));
    }
    let hlen = match pre[6] {
        1 => {
            let mut b = [0u8; 2];
            f.read_exact(&mut b)
                .map_err(|_| bad("truncated header length".into()))?;
            u16::from_le_bytes(b) as usize
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            f.read_exact(&mut b)
                .map_err(|_| bad("truncated header length".into()))?;
            u32::from_le_bytes(b) as usize
        }
        v => return Err(bad(format!("unsupported format version {v}.{}", pre[7]))),
    };
    let prefix = if pre[6] == 1 { 10 } else { 12 };
    if hlen > MAX_HEADER || (prefix + hlen) as u64 > file_len {
        return Err(bad(format!(
            "header length {hlen} does not fit the file ({file_len} bytes)"
        )));
    }
    let mut header = vec![0u8; hlen];
    f.read_exact(&mut header).map_err(io)?;
    let header = std::str::from_utf8(&header).map_err(|_| bad("header is not text".into()))?;
    let (dtype, shape) = parse_header(header).map_err(bad)?;
    let bytes = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .and_then(|n| dtype.bytes_for(n))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
    let have = file_len - (prefix + hlen) as u64;
    if bytes as u64 != have {
        return Err(bad(format!(
            "header declares {dtype}{shape:?} = {bytes} data bytes, the file holds {have}"
        )));
    }
    let mut data = vec![0u8; bytes];
    f.read_exact(&mut data).map_err(io)?;
    Ok(Npy { dtype, shape, data })
}

/// Encodes `data` (raw little-endian `dtype`) as a `.npy` file of `shape`.
/// `None` when NumPy has no such dtype.
pub fn encode(dtype: DType, shape: &[usize], data: &[u8]) -> Option<Vec<u8>> {
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
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_txt}, }}",
        descr(dtype)?
    );
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
    Some(out)
}

/// Parses the header dict: `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
fn parse_header(h: &str) -> Result<(DType, Vec<usize>), String> {
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
            k => return Err(format!("unexpected header key '{k}'")),
        }
        p.ws();
        if !p.eat(b',') {
            p.expect(b'}')?;
            break;
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err("trailing text after the header dict".into());
    }
    let descr = descr.ok_or("header has no 'descr'")?;
    let shape = shape.ok_or("header has no 'shape'")?;
    if fortran.ok_or("header has no 'fortran_order'")? {
        return Err("Fortran-order arrays are not supported".into());
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

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!(
                "expected '{}' at header byte {}",
                c as char, self.i
            ))
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.ws();
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("expected a string at header byte {}", self.i)),
        };
        let start = self.i + 1;
        let len = self.s[start..]
            .iter()
            .position(|&c| c == q)
            .ok_or("unterminated string in header")?;
        self.i = start + len + 1;
        Ok(String::from_utf8_lossy(&self.s[start..start + len]).into_owned())
    }

    fn boolean(&mut self) -> Result<bool, String> {
        self.ws();
        for (word, v) in [("True", true), ("False", false)] {
            if self.s[self.i..].starts_with(word.as_bytes()) {
                self.i += word.len();
                return Ok(v);
            }
        }
        Err(format!("expected True or False at header byte {}", self.i))
    }

    fn tuple(&mut self) -> Result<Vec<usize>, String> {
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
                .map_err(|_| format!("bad shape entry at header byte {start}"))?;
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

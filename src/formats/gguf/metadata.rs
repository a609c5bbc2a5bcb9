//! Metadata values: the thirteen GGUF value types, read zero-copy (strings and
//! arrays borrow the file's bytes).

use super::cursor::Cursor;
use super::error::{GgufError, Result};

/// How deep arrays may nest (an array of arrays is depth 2).
pub const MAX_NESTING: usize = 16;

/// A GGUF metadata value type (`enum gguf_type`).
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    const ALL: [ValueType; 13] = {
        use ValueType::*;
        [
            U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64,
        ]
    };

    /// The type of a value type id, if GGUF defines it.
    pub fn from_id(id: u32) -> Option<ValueType> {
        Self::ALL.get(id as usize).copied()
    }

    /// The lowercase name (`u8`, ..., `string`, `array`).
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// Bytes of a value of this type, for the fixed-size ones.
    pub fn fixed_size(self) -> Option<usize> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// The fewest bytes a value of this type takes (a string: its length; an array:
    /// its element type and count).
    fn min_size(self) -> usize {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            t => t.fixed_size().unwrap_or(1),
        }
    }
}

/// One metadata value; strings and arrays borrow the file's bytes.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MetaValue<'a> {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    /// The string's bytes (GGUF says UTF-8; see [`MetaValue::as_str`]).
    String(&'a [u8]),
    Array(MetaArray<'a>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl<'a> MetaValue<'a> {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            MetaValue::U8(_) => ValueType::U8,
            MetaValue::I8(_) => ValueType::I8,
            MetaValue::U16(_) => ValueType::U16,
            MetaValue::I16(_) => ValueType::I16,
            MetaValue::U32(_) => ValueType::U32,
            MetaValue::I32(_) => ValueType::I32,
            MetaValue::F32(_) => ValueType::F32,
            MetaValue::Bool(_) => ValueType::Bool,
            MetaValue::String(_) => ValueType::String,
            MetaValue::Array(_) => ValueType::Array,
            MetaValue::U64(_) => ValueType::U64,
            MetaValue::I64(_) => ValueType::I64,
            MetaValue::F64(_) => ValueType::F64,
        }
    }

    /// The string, when this is a UTF-8 string.
    pub fn as_str(&self) -> Option<&'a str> {
        match self {
            MetaValue::String(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The array, when this is one.
    pub fn as_array(&self) -> Option<MetaArray<'a>> {
        match self {
            MetaValue::Array(a) => Some(*a),
            _ => None,
        }
    }

    /// An unsigned or non-negative signed integer as u64.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }
}

/// An array value: its element type, length and the bytes of its elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetaArray<'a> {
    elem: ValueType,
    len: u64,
    body: &'a [u8],
}

impl<'a> MetaArray<'a> {
    /// The element type.
    pub fn element_type(&self) -> ValueType {
        self.elem
    }

    /// The number of elements.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements' bytes as stored (for fixed-size elements, `len` values back to back).
    pub fn bytes(&self) -> &'a [u8] {
        self.body
    }

    /// The elements, in order. The reader validated them when the file was opened.
    pub fn iter(&self) -> impl Iterator<Item = MetaValue<'a>> + 'a {
        let mut cur = Cursor::at(self.body, 0);
        let elem = self.elem;
        // Validation read these very bytes with the same function, so no error can
        // occur here; should one, the iteration ends rather than panics.
        (0..self.len).map_while(move |_| read_value(&mut cur, elem, "", 1).ok())
    }
}

/// Reads one value of type `ty`; `key` names it in errors; `depth` counts arrays.
pub(crate) fn read_value<'a>(
    cur: &mut Cursor<'a>,
    ty: ValueType,
    key: &str,
    depth: usize,
) -> Result<MetaValue<'a>> {
    const W: &str = "metadata value";
    Ok(match ty {
        ValueType::U8 => MetaValue::U8(cur.u8(W)?),
        ValueType::I8 => MetaValue::I8(cur.u8(W)? as i8),
        ValueType::U16 => MetaValue::U16(u16::from_le_bytes(cur.array(W)?)),
        ValueType::I16 => MetaValue::I16(i16::from_le_bytes(cur.array(W)?)),
        ValueType::U32 => MetaValue::U32(cur.u32(W)?),
        ValueType::I32 => MetaValue::I32(i32::from_le_bytes(cur.array(W)?)),
        ValueType::F32 => MetaValue::F32(f32::from_le_bytes(cur.array(W)?)),
        ValueType::U64 => MetaValue::U64(cur.u64(W)?),
        ValueType::I64 => MetaValue::I64(i64::from_le_bytes(cur.array(W)?)),
        ValueType::F64 => MetaValue::F64(f64::from_le_bytes(cur.array(W)?)),
        ValueType::Bool => {
            let offset = cur.pos() as u64;
            match cur.u8(W)? {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                value => {
                    return Err(GgufError::InvalidBool {
                        key: key.to_owned(),
                        value,
                        offset,
                    });
                }
            }
        }
        ValueType::String => MetaValue::String(cur.string("metadata string")?),
        ValueType::Array => MetaValue::Array(read_array(cur, key, depth + 1)?),
    })
}

/// A value type id, checked.
pub(crate) fn read_type(cur: &mut Cursor<'_>, key: &str) -> Result<ValueType> {
    let offset = cur.pos() as u64;
    let id = cur.u32("metadata value type")?;
    ValueType::from_id(id).ok_or_else(|| GgufError::UnknownValueType {
        key: key.to_owned(),
        id,
        offset,
    })
}

/// An array: element type, u64 count, elements. The count is first checked against
/// the bytes left (each element takes at least its type's minimum size); then
/// fixed-size elements are taken as one span and strings and arrays are walked.
fn read_array<'a>(cur: &mut Cursor<'a>, key: &str, depth: usize) -> Result<MetaArray<'a>> {
    let start = cur.pos();
    if depth > MAX_NESTING {
        return Err(GgufError::NestingTooDeep {
            key: key.to_owned(),
            max: MAX_NESTING,
            offset: start as u64,
        });
    }
    let elem = read_type(cur, key)?;
    let len = cur.count("metadata array element", elem.min_size())?;
    let body_start = cur.pos();
    if let Some(size) = elem.fixed_size() {
        // `count` bounded len * size by the bytes left: no overflow.
        cur.take(len * size as u64, "metadata array")?;
    } else {
        for _ in 0..len {
            read_value(cur, elem, key, depth)?;
        }
    }
    let body = cur.since(body_start);
    Ok(MetaArray { elem, len, body })
}

//! The declaration IR of a block format: data only, `'static` consts.
//!
//! An element of a block is named by mixed-radix digits (outer..inner); every byte
//! and bit position of a GGUF layout is affine in those digits. An element's integer
//! is `offset + sum(field << at)`; its per-group float parameters come from a small
//! program run once per group (sub-block); its value is the [`BlockFormula`] over
//! the integer and the parameters.

/// One block type: where its integers and parameters sit and how they combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockDecl {
    /// The type's name (GGUF spelling).
    pub name: &'static str,
    /// Bytes per block.
    pub block_bytes: usize,
    /// Elements per block (the product of `digits`).
    pub block_elems: usize,
    /// The radices of an element's index, outer first: element
    /// `i = ((d0 * r1 + d1) * r2 + d2) ...`.
    pub digits: &'static [usize],
    /// The bit fields that assemble the element's integer.
    pub fields: &'static [Field],
    /// Added to the assembled integer.
    pub offset: i32,
    /// The group (sub-block) of an element: `sum(digit * coefficient)`; the
    /// innermost coefficient is 0 (a run of inner elements shares its parameters).
    pub group: &'static [usize],
    /// Groups per block.
    pub groups: usize,
    /// The parameter program, evaluated once per group.
    pub params: &'static [ParamNode],
    /// The nodes of `params` that are the formula's `Param(0)`, `Param(1)`, ...
    pub outputs: &'static [u16],
    /// The element formula.
    pub formula: BlockFormula,
}

/// A strided bit field of the block's bytes: for digits `d`, `bits` bits from bit
/// `shift + sum(d * shift_stride)` of the little-endian bytes at
/// `byte + sum(d * byte_stride)`. One element's bits never cross a byte, but the
/// shift may run past 8 into later bytes (at most 32 bits from the field's byte):
/// Q5_0's fifth bits are the bits of one 32-bit `qh`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The byte of digit 0.
    pub byte: usize,
    /// Bytes per unit of each digit.
    pub byte_stride: &'static [usize],
    /// The bit shift of digit 0.
    pub shift: u8,
    /// Bit shift per unit of each digit.
    pub shift_stride: &'static [u8],
    /// Width in bits (1..=8).
    pub bits: u8,
    /// The field is a two's-complement signed value.
    pub signed: bool,
    /// The field indexes this table (MXFP4's doubled e2m1 values).
    pub lut: Option<&'static [i8; 16]>,
    /// Where the field lands in the integer (shifted left by `at`).
    pub at: u8,
}

/// An operation of the parameter program (per group `g`); operands index earlier
/// nodes. Integer nodes are exact; float nodes are f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamNode {
    /// The f16 at byte `at`, as gguf-py widens it (exact; a NaN keeps its payload and
    /// its signalling bit).
    F16(usize),
    /// The e8m0 byte at `at` as gguf-py's `e8m0_to_fp32_half`: `2^(e - 128)` built
    /// from bits (e = 255 gives 2^127).
    E8m0Half(usize),
    /// Integer: bits `shift..shift + bits` of byte `at + stride * g`.
    Byte {
        /// Byte of group 0.
        at: usize,
        /// Bytes per group.
        stride: usize,
        /// Bit shift.
        shift: u8,
        /// Width in bits.
        bits: u8,
        /// Sign-extend from `bits`.
        signed: bool,
    },
    /// Integer: the 6-bit packed scale (`min: false`) or min of group `g` of
    /// Q4_K/Q5_K, from the 12 bytes at `at` (gguf-py's `get_scale_min`).
    K4ScaleMin {
        /// First of the 12 bytes.
        at: usize,
        /// The min rather than the scale.
        min: bool,
    },
    /// Integer: Q3_K's 6-bit scale of group `g` (0..63) from the 12 bytes at `at`.
    K3Scale(usize),
    /// Integer `a + k`.
    AddInt(u16, i32),
    /// Integer node rounded to f32 (exact: the integers are small).
    Float(u16),
    /// f32 `a * b`.
    Mul(u16, u16),
}

/// The element formula over the integer `q` and the group's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockFormula {
    /// SSA nodes; the last is the value.
    pub nodes: &'static [BlockNode],
}

/// A node of a [`BlockFormula`]. Float operations are f32, unfused; a NaN first
/// operand is the result (quieted), as x86-64 returns it and gguf-py's
/// reference records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockNode {
    /// The element's integer.
    Q,
    /// Integer node to f32.
    Float(u16),
    /// Group parameter `k` (f32).
    Param(u16),
    /// `a + b`.
    Add(u16, u16),
    /// `a - b`.
    Sub(u16, u16),
    /// `a * b`.
    Mul(u16, u16),
}

impl BlockDecl {
    /// The innermost radix: elements per run sharing one group.
    pub const fn inner(&self) -> usize {
        self.digits[self.digits.len() - 1]
    }

    /// Checks the declaration's own consistency: digits multiply to `block_elems`,
    /// strides have one entry per digit, every field and parameter byte lies in the
    /// block, every field stays inside its byte, groups are in range, operands refer
    /// to earlier nodes. The generated driver relies on these facts.
    pub const fn check(&self) -> Result<(), &'static str> {
        let n = self.digits.len();
        if n == 0 || self.group.len() != n || self.group[n - 1] != 0 {
            return Err("group coefficients: one per digit, innermost 0");
        }
        let mut elems = 1;
        let mut max_group = 0;
        let mut k = 0;
        while k < n {
            elems *= self.digits[k];
            max_group += (self.digits[k] - 1) * self.group[k];
            k += 1;
        }
        if elems != self.block_elems || elems == 0 {
            return Err("digits do not multiply to block_elems");
        }
        if max_group >= self.groups || self.groups > MAX_GROUPS {
            return Err("group out of range");
        }
        if self.block_elems > MAX_ELEMS || self.outputs.len() > MAX_PARAMS {
            return Err("block too large");
        }
        let mut f = 0;
        while f < self.fields.len() {
            if let Err(e) = self.fields[f].check(self.digits, self.block_bytes) {
                return Err(e);
            }
            f += 1;
        }
        if let Err(e) = check_params(self.params, self.groups, self.block_bytes) {
            return Err(e);
        }
        let mut o = 0;
        while o < self.outputs.len() {
            if self.outputs[o] as usize >= self.params.len() {
                return Err("parameter output out of range");
            }
            o += 1;
        }
        check_formula(self.formula.nodes, self.outputs.len())
    }
}

/// Most elements per block a declaration may have.
pub const MAX_ELEMS: usize = 256;
/// Most groups per block.
pub const MAX_GROUPS: usize = 16;
/// Most parameters per group.
pub const MAX_PARAMS: usize = 2;
/// Most nodes in a parameter program or formula.
pub const MAX_NODES: usize = 12;

impl Field {
    /// True when some element's bits lie past the field's first byte (see
    /// [`Field`]), for a declaration of radices `digits`: its bits are read from
    /// a 32-bit window.
    pub const fn wide(&self, digits: &[usize]) -> bool {
        let mut shift = self.shift as usize;
        let mut k = 0;
        while k < digits.len() && k < self.shift_stride.len() {
            shift += (digits[k] - 1) * self.shift_stride[k] as usize;
            k += 1;
        }
        shift + self.bits as usize > 8
    }

    const fn check(&self, digits: &[usize], block_bytes: usize) -> Result<(), &'static str> {
        let n = digits.len();
        if self.byte_stride.len() != n || self.shift_stride.len() != n {
            return Err("field strides: one per digit");
        }
        if self.bits == 0 || self.bits > 8 || (self.lut.is_some() && self.bits > 4) {
            return Err("field width");
        }
        let (mut byte, mut shift) = (self.byte, self.shift as usize);
        let mut k = 0;
        while k < n {
            byte += (digits[k] - 1) * self.byte_stride[k];
            shift += (digits[k] - 1) * self.shift_stride[k] as usize;
            k += 1;
        }
        if byte >= block_bytes || shift + self.bits as usize > 32 {
            return Err("field outside the block or its 32 bits");
        }
        if shift + self.bits as usize > 8 {
            // Past the first byte: whole bytes of the window inside the block, and
            // no element's bits across a byte (bits 1, 2, 4 or 8 at aligned shifts).
            let last = byte + (shift + self.bits as usize - 1) / 8;
            if last >= block_bytes || !8usize.is_multiple_of(self.bits as usize) {
                return Err("field outside the block or across a byte");
            }
            let mut k = 0;
            while k < n {
                if !self.shift_stride[k].is_multiple_of(self.bits) || self.byte_stride[n - 1] != 0 {
                    return Err("field across a byte");
                }
                k += 1;
            }
            if !self.shift.is_multiple_of(self.bits) {
                return Err("field across a byte");
            }
        }
        Ok(())
    }
}

const fn check_params(p: &[ParamNode], groups: usize, bytes: usize) -> Result<(), &'static str> {
    if p.len() > MAX_NODES {
        return Err("parameter program too long");
    }
    let mut i = 0;
    while i < p.len() {
        let ok = match p[i] {
            ParamNode::F16(at) => at + 2 <= bytes,
            ParamNode::E8m0Half(at) => at < bytes,
            ParamNode::Byte {
                at,
                stride,
                shift,
                bits,
                ..
            } => at + stride * (groups - 1) < bytes && bits > 0 && shift + bits <= 8,
            ParamNode::K4ScaleMin { at, .. } => groups <= 8 && at + 12 <= bytes,
            ParamNode::K3Scale(at) => groups <= 16 && at + 12 <= bytes,
            ParamNode::AddInt(a, _) | ParamNode::Float(a) => (a as usize) < i,
            ParamNode::Mul(a, b) => (a as usize) < i && (b as usize) < i,
        };
        if !ok {
            return Err("parameter node out of range");
        }
        i += 1;
    }
    Ok(())
}

const fn check_formula(nodes: &[BlockNode], params: usize) -> Result<(), &'static str> {
    if nodes.is_empty() || nodes.len() > MAX_NODES {
        return Err("formula length");
    }
    let mut i = 0;
    while i < nodes.len() {
        let ok = match nodes[i] {
            BlockNode::Q => true,
            BlockNode::Param(k) => (k as usize) < params,
            BlockNode::Float(a) => (a as usize) < i && matches!(nodes[a as usize], BlockNode::Q),
            BlockNode::Add(a, b) | BlockNode::Sub(a, b) | BlockNode::Mul(a, b) => {
                (a as usize) < i && (b as usize) < i && is_float(nodes, a) && is_float(nodes, b)
            }
        };
        if !ok {
            return Err("formula operand out of range");
        }
        i += 1;
    }
    Ok(())
}

const fn is_float(nodes: &[BlockNode], a: u16) -> bool {
    !matches!(nodes[a as usize], BlockNode::Q)
}

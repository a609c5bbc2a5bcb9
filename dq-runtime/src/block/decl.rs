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
    /// A codebook row per run, added to the integer (the IQ1, IQ2 and IQ3 types).
    pub grid: Option<Grid>,
    /// Further parts of the block, for a layout no one set of digits describes
    /// (TQ1_0's three sections): each part's elements follow this declaration's own
    /// (`own_elems`) and the earlier parts', laid out by the part's own digits,
    /// fields, groups and parameters over the same block bytes. At most
    /// [`MAX_PARTS`]; a part has no parts.
    pub then: &'static [&'static BlockDecl],
}

/// A codebook lookup per run of inner elements: the run's one or two rows of
/// `table` side by side (row `k`'s index assembled from the fields `index[k]`; one
/// row of 8 lanes for the IQ1 and IQ2 types, two of 4 for the IQ3 types), lane `l` for the run's element
/// `l`, shifted left by `at`, negated where bit `l` of the run's sign mask is set.
/// The mask is assembled from `signs` fields, then looked up in `sign_table` where
/// there is one (ggml's `ksigns_iq2xs`). Index and sign fields are constant over a
/// run (their innermost strides are 0) and may span bytes (up to 16 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Rows of `inner() / index.len()` lanes.
    pub table: &'static Table,
    /// Per row of a run, the fields assembling its index.
    pub index: &'static [&'static [Field]],
    /// The fields assembling a run's sign mask (or its index into `sign_table`).
    pub signs: &'static [Field],
    /// The sign masks, one lane each, where the mask is looked up.
    pub sign_table: Option<&'static Table>,
    /// Where the lanes land in the integer (shifted left by `at`; IQ1's grid
    /// values are eighths of the integer, see `gguf::IQ1_S`).
    pub at: u8,
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
    /// The field's 8 bits hold base-3 digits as ggml's TQ1_0 packs them: the shift
    /// (`shift + sum(d * shift_stride)`, at most 4) is the digit's place `p`, not a
    /// bit shift, and the value is `((b * 3^p) mod 256 * 3) >> 8` (gguf-py's
    /// `(qs * [1, 3, 9, 27, 81]).astype(np.uint16) * 3 >> 8`).
    pub base3: bool,
    /// The field's bits index this table (MXFP4's doubled e2m1 values, IQ4's
    /// non-linear levels): the element's integer is the entry, not the bits.
    pub table: Option<&'static Table>,
    /// Where the field lands in the integer (shifted left by `at`).
    pub at: u8,
}

/// A `'static` table of signed bytes, copied verbatim from its source (named in the
/// table's doc), in rows of `lanes` values. A [`Field`] of `bits` bits indexes a
/// one-lane table of one entry per bit pattern (`values.len() == 1 << bits`); a
/// [`Grid`] indexes rows of as many lanes as a run has elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    /// The table's name in its source (`kvalues_iq4nl`).
    pub name: &'static str,
    /// Row `v`, lane `l`: `values[v * lanes + l]`.
    pub values: &'static [i8],
    /// Values per row.
    pub lanes: usize,
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
    /// Integer: `bits` bits from bit `shift * g` of the little-endian bytes at
    /// `at` (IQ4_XS's 4-bit `scales_l` and 2-bit `scales_h` of group `g`); a
    /// group's bits never cross a byte.
    GroupBits {
        /// First byte.
        at: usize,
        /// Bits per group.
        shift: u8,
        /// Width in bits.
        bits: u8,
    },
    /// The f32 at byte `at` (Q8_K's `d`), bits as stored.
    F32(usize),
    /// The f16 whose bits are the low 16 bits of integer node `a`, widened as
    /// [`F16`](Self::F16) (IQ1_M's `d`, assembled from four nibbles).
    F16Of(u16),
    /// f32 node `a`, a signalling NaN quieted (as x86 arithmetic and ggml's f16
    /// conversion quiet it; a product by 1.0 would do, but compilers fold it away).
    Quiet(u16),
    /// Integer: `bits` bits from bit `outer * (g / per) + inner * (g % per)` of the
    /// little-endian bytes at `at`; the bits may cross a byte (IQ1_M's 3-bit
    /// scales, four to each u16).
    Bits {
        /// First byte.
        at: usize,
        /// Groups per outer step.
        per: u8,
        /// Bits per outer step.
        outer: u8,
        /// Bits per group within an outer step.
        inner: u8,
        /// Width in bits (1..=8).
        bits: u8,
    },
    /// The unsigned e4m3 byte at `at + g` as gguf-py's NVFP4 `ue4m3_to_fp32`
    /// (halved; 0 for the bytes 0 and 0x7F; the top bit ignored).
    Ue4m3Half(usize),
    /// Integer `a | (b << k)`.
    OrShl(u16, u16, u8),
    /// The f32 of these bits (a constant).
    Const(u32),
    /// f32 `a + b`.
    Add(u16, u16),
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
    /// `a` with its sign bit flipped where `b`'s is set (a bit operation: a NaN
    /// `a` keeps its payload; ggml's `bit ? d : -d` for Q1_0).
    FlipSign(u16, u16),
}

impl BlockDecl {
    /// The innermost radix: elements per run sharing one group.
    pub const fn inner(&self) -> usize {
        self.digits[self.digits.len() - 1]
    }

    /// The elements its own digits lay out (all of them, unless it has parts).
    pub const fn own_elems(&self) -> usize {
        let mut n = 1;
        let mut k = 0;
        while k < self.digits.len() {
            n *= self.digits[k];
            k += 1;
        }
        n
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
        if let Err(e) = check_parts(self) {
            return Err(e);
        }
        let mut p = 0;
        while p < self.then.len() {
            elems += self.then[p].block_elems;
            p += 1;
        }
        if elems != self.block_elems || elems == 0 {
            return Err("digits (and parts) do not make block_elems");
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
        if let Some(g) = &self.grid
            && let Err(e) = g.check(self.digits, self.block_bytes)
        {
            return Err(e);
        }
        check_formula(self.formula.nodes, self.outputs.len())
    }
}

impl Grid {
    /// Rows and sign masks are in their tables for every bit pattern of the
    /// fields, a run's rows have one lane per element of the run, the fields are
    /// constant over a run and inside the block.
    const fn check(&self, digits: &[usize], block_bytes: usize) -> Result<(), &'static str> {
        let inner = digits[digits.len() - 1];
        let rows = self.index.len();
        if rows == 0 || rows > 2 || self.table.lanes * rows != inner || self.at > 4 {
            return Err("grid: one or two rows a run, side by side, one lane per run element");
        }
        let mut k = 0;
        while k < rows {
            let bits = match run_fields(self.index[k], digits, block_bytes) {
                Ok(b) => b,
                Err(e) => return Err(e),
            };
            if self.table.values.len() != self.table.lanes << bits {
                return Err("grid: a row per index pattern");
            }
            k += 1;
        }
        let sign_bits = match run_fields(self.signs, digits, block_bytes) {
            Ok(b) => b,
            Err(e) => return Err(e),
        };
        match self.sign_table {
            Some(t) if t.lanes != 1 || t.values.len() != 1 << sign_bits => {
                Err("grid: one sign mask per sign pattern")
            }
            None if sign_bits > inner => Err("grid: more sign bits than run elements"),
            _ if inner > 8 => Err("grid: a sign mask is one byte"),
            _ => Ok(()),
        }
    }
}

/// A declaration's parts: at most [`MAX_PARTS`], each valid on its own, of the same
/// block bytes, without parts of its own.
const fn check_parts(d: &BlockDecl) -> Result<(), &'static str> {
    if d.then.len() > MAX_PARTS {
        return Err("too many parts");
    }
    let mut p = 0;
    while p < d.then.len() {
        let part = d.then[p];
        if part.block_bytes != d.block_bytes || !part.then.is_empty() {
            return Err("a part: the same block bytes, no parts of its own");
        }
        if let Err(e) = part.check() {
            return Err(e);
        }
        p += 1;
    }
    Ok(())
}

/// Checks run-constant fields (innermost strides 0, at most 16 bits from the
/// field's byte, inside the block, landing side by side from bit 0) and returns
/// how many bits they assemble.
const fn run_fields(
    fields: &[Field],
    digits: &[usize],
    block_bytes: usize,
) -> Result<usize, &'static str> {
    let n = digits.len();
    let mut total = 0;
    let mut f = 0;
    while f < fields.len() {
        let x = &fields[f];
        if x.byte_stride.len() != n || x.shift_stride.len() != n {
            return Err("field strides: one per digit");
        }
        if x.byte_stride[n - 1] != 0
            || x.shift_stride[n - 1] != 0
            || x.table.is_some()
            || x.signed
            || x.base3
        {
            return Err("grid field: plain and constant over a run");
        }
        let (mut byte, mut shift) = (x.byte, x.shift as usize);
        let mut k = 0;
        while k < n {
            byte += (digits[k] - 1) * x.byte_stride[k];
            shift += (digits[k] - 1) * x.shift_stride[k] as usize;
            k += 1;
        }
        let end = shift + x.bits as usize;
        if x.bits == 0 || x.bits > 16 || end > 32 || byte + (end - 1) / 8 >= block_bytes {
            return Err("grid field outside the block or over 16 bits");
        }
        if x.at as usize != total {
            return Err("grid fields land side by side from bit 0");
        }
        total += x.bits as usize;
        f += 1;
    }
    if total > 16 {
        return Err("grid index over 16 bits");
    }
    Ok(total)
}

/// Most further parts a declaration may have ([`BlockDecl::then`]).
pub const MAX_PARTS: usize = 2;
/// Most elements per block a declaration may have.
pub const MAX_ELEMS: usize = 256;
/// Most groups per block.
pub const MAX_GROUPS: usize = 16;
/// Most parameters per group.
pub const MAX_PARAMS: usize = 2;
/// Most nodes in a parameter program or formula.
pub const MAX_NODES: usize = 16;

impl Field {
    /// True when some element's bits lie past the field's first byte (see
    /// [`Field`]), for a declaration of radices `digits`: its bits are read from
    /// a 32-bit window.
    pub const fn wide(&self, digits: &[usize]) -> bool {
        if self.base3 {
            return false;
        }
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
        if self.bits == 0 || self.bits > 8 {
            return Err("field width");
        }
        if let Some(t) = self.table
            && (t.values.len() != 1 << self.bits || self.signed || t.lanes != 1)
        {
            return Err("table: one entry per bit pattern of an unsigned field");
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
        if self.base3 {
            return if self.bits == 8 && !self.signed && self.table.is_none() && shift <= 4 {
                Ok(())
            } else {
                Err("base-3 field: a plain byte, digit places 0..=4")
            };
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
            ParamNode::F32(at) => at + 4 <= bytes,
            ParamNode::F16Of(a) | ParamNode::Quiet(a) => (a as usize) < i,
            ParamNode::Bits {
                at,
                per,
                outer,
                inner,
                bits,
            } => bits_in_block(at, [per, outer, inner, bits], groups, bytes),
            ParamNode::Ue4m3Half(at) => at + groups <= bytes,
            ParamNode::GroupBits { at, shift, bits } => {
                let last = shift as usize * (groups - 1);
                bits > 0 && bits <= 8 && 8 % bits == 0 && shift % bits == 0 && at + last / 8 < bytes
            }
            ParamNode::OrShl(a, b, k) => (a as usize) < i && (b as usize) < i && k < 16,
            ParamNode::Const(_) => true,
            ParamNode::Add(a, b) => (a as usize) < i && (b as usize) < i,
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

/// Every group's bits of a [`ParamNode::Bits`] (`[per, outer, inner, bits]`) lie
/// in the block.
const fn bits_in_block(at: usize, b: [u8; 4], groups: usize, bytes: usize) -> bool {
    let [per, outer, inner, bits] = b;
    if per == 0 || bits == 0 || bits > 8 {
        return false;
    }
    let mut g = 0;
    while g < groups {
        let bit = outer as usize * (g / per as usize) + inner as usize * (g % per as usize);
        if at + (bit + bits as usize - 1) / 8 >= bytes {
            return false;
        }
        g += 1;
    }
    true
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
            BlockNode::Add(a, b)
            | BlockNode::Sub(a, b)
            | BlockNode::Mul(a, b)
            | BlockNode::FlipSign(a, b) => {
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

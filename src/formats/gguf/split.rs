//! gguf-split sets: one model written as `NAME-00001-of-0000N.gguf` ...
//! `NAME-0000N-of-0000N.gguf` (llama.cpp's `gguf-split`, gguf-py's
//! `GGUFWriter(split_max_tensors=, split_max_size=)`). Each part is a whole GGUF
//! file placed by its keys `split.no` (from 0), `split.count` and
//! `split.tensors.count` (tensors in the whole set); the model's metadata is part
//! 1's, its tensors are those of every part in part order.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::error::{GgufError, Result};
use super::metadata::MetaValue;
use super::parse::Index;
use super::tensor::TensorInfo;

/// The part number, from 0.
pub const KEY_NO: &str = "split.no";
/// The number of parts.
pub const KEY_COUNT: &str = "split.count";
/// The number of tensors in all parts together.
pub const KEY_TENSORS: &str = "split.tensors.count";

/// A file's place in a split set: its `split.*` keys, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// The part's number from 0 (`split.no`); the file name counts from 1.
    pub no: u16,
    /// Parts in the set (`split.count`), at least 1.
    pub count: u16,
    /// Tensors in the whole set (`split.tensors.count`).
    pub tensors: u64,
}

impl Split {
    /// The part's number from 1, as in its file name.
    pub fn part(&self) -> u32 {
        u32::from(self.no) + 1
    }
}

/// The split keys of a file: `None` without `split.count`. A count of 1 needs no
/// other key (`split.no` is then 0, `split.tensors.count` the file's own count).
pub(crate) fn keys(buf: &[u8], index: &Index) -> Result<Option<Split>> {
    let int = |key: &'static str| -> Result<Option<u64>> {
        match index.get(buf, key) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| type_error(key, v)),
        }
    };
    let Some(count) = int(KEY_COUNT)? else {
        return Ok(None);
    };
    if !(1..=u64::from(u16::MAX)).contains(&count) {
        let no = int(KEY_NO)?.unwrap_or(0);
        return Err(GgufError::SplitRange { no, count });
    }
    let missing = |key| GgufError::SplitKeyMissing { key, count };
    let (no, tensors) = if count == 1 {
        let own = index.tensors.len() as u64;
        (int(KEY_NO)?.unwrap_or(0), int(KEY_TENSORS)?.unwrap_or(own))
    } else {
        let no = int(KEY_NO)?.ok_or_else(|| missing(KEY_NO))?;
        (no, int(KEY_TENSORS)?.ok_or_else(|| missing(KEY_TENSORS))?)
    };
    match (u16::try_from(no), u16::try_from(count)) {
        (Ok(no), Ok(count)) if no < count => Ok(Some(Split { no, count, tensors })),
        _ => Err(GgufError::SplitRange { no, count }),
    }
}

fn type_error(key: &'static str, v: MetaValue<'_>) -> GgufError {
    let found = match v {
        MetaValue::Array(_) => "array",
        v => v.value_type().name(),
    };
    GgufError::SplitKeyType { key, found }
}

/// The file name of part `part` (from 1) of `count`: `{stem}-{part:05}-of-{count:05}.gguf`.
pub fn part_name(stem: &str, part: u32, count: u16) -> String {
    format!("{stem}-{part:05}-of-{count:05}.gguf")
}

/// The paths of every part of the set that `path`, part `split.part()`, belongs
/// to: its name with the part number replaced. `None` when the file name is not
/// gguf-split's for that part (then the other parts cannot be found).
pub fn part_paths(path: &Path, split: Split) -> Option<Vec<PathBuf>> {
    let (part, paths) = set_paths(path, split.count)?;
    (part == split.part()).then_some(paths)
}

/// The part number (from 1) that the file name of `path` says, and the paths of
/// every part of its `count`-part set; `None` for a name that is not gguf-split's
/// `NAME-0000k-of-0000N.gguf` with N = `count`.
pub fn set_paths(path: &Path, count: u16) -> Option<(u32, Vec<PathBuf>)> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_suffix(&format!("-of-{count:05}.gguf"))?;
    let (stem, digits) = rest.split_at_checked(rest.len().checked_sub(6)?)?;
    let digits = digits
        .strip_prefix('-')
        .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))?;
    let part = digits
        .parse()
        .ok()
        .filter(|k| (1..=u32::from(count)).contains(k))?;
    let paths = (1..=u32::from(count))
        .map(|k| path.with_file_name(part_name(stem, k, count)))
        .collect();
    Some((part, paths))
}

/// Checks that `indexes` (part k at index k) are the whole set `expected` says
/// (the keys of one of them) and returns the tensors of every part, in part order,
/// each tagged with its part. `paths` name the parts in errors.
pub(crate) fn join(
    parts: &mut [(&[u8], &mut Index)],
    expected: Split,
    paths: Option<&[PathBuf]>,
) -> Result<Vec<TensorInfo>> {
    let mut tensors = Vec::new();
    let mut names = HashSet::new();
    for (k, (buf, index)) in parts.iter_mut().enumerate() {
        check_place(k, buf, index, expected, paths.and_then(|p| p.get(k)))?;
        for mut t in std::mem::take(&mut index.tensors) {
            if !names.insert(t.name.clone()) {
                return Err(GgufError::DuplicateTensor { name: t.name });
            }
            t.part = k;
            tensors.push(t);
        }
    }
    let found = tensors.len() as u64;
    if found != expected.tensors {
        return Err(GgufError::SplitTensorCount {
            expected: expected.tensors,
            found,
            count: expected.count,
        });
    }
    Ok(tensors)
}

/// Checks that the file `buf` (`index`), at `path`, is part `k` (from 0) of the set
/// `expected`.
pub(crate) fn check_place(
    k: usize,
    buf: &[u8],
    index: &Index,
    expected: Split,
    path: Option<&PathBuf>,
) -> Result<()> {
    let part = k as u32 + 1;
    let found = keys(buf, index).map_err(|e| in_part(part, expected.count, path.cloned(), e))?;
    let in_place = Split {
        no: k as u16,
        ..expected
    };
    if found == Some(in_place) {
        return Ok(());
    }
    Err(GgufError::ForeignPart {
        part,
        count: expected.count,
        tensors: expected.tensors,
        path: path.cloned(),
        found: found.map_or_else(|| "no split keys".into(), |s| said(&s)),
    })
}

/// `split.no 0, split.count 4, split.tensors.count 9`.
fn said(s: &Split) -> String {
    format!(
        "split.no {}, split.count {}, split.tensors.count {}",
        s.no, s.count, s.tensors
    )
}

/// An error of part `part` of `count`, naming the part.
pub(crate) fn in_part(part: u32, count: u16, path: Option<PathBuf>, e: GgufError) -> GgufError {
    GgufError::SplitPart {
        part,
        count,
        path,
        source: Box::new(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_paths_follow_gguf_split_names() {
        let s = Split {
            no: 1,
            count: 3,
            tensors: 7,
        };
        let paths = part_paths(Path::new("/m/x-00002-of-00003.gguf"), s).unwrap();
        let names: Vec<_> = paths.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "/m/x-00001-of-00003.gguf",
                "/m/x-00002-of-00003.gguf",
                "/m/x-00003-of-00003.gguf"
            ]
        );
        // The name must say this very part of this very count.
        for bad in [
            "x-00001-of-00003.gguf",
            "x-00002-of-00004.gguf",
            "x-2-of-3.gguf",
            "x.gguf",
        ] {
            assert_eq!(part_paths(Path::new(bad), s), None, "{bad}");
        }
        assert_eq!(part_name("a-b", 12, 345), "a-b-00012-of-00345.gguf");
        let (part, paths) = set_paths(Path::new("a-b-00003-of-00003.gguf"), 3).unwrap();
        assert_eq!(
            (part, paths[0].to_str()),
            (3, Some("a-b-00001-of-00003.gguf"))
        );
        for bad in [
            "x-00000-of-00003.gguf",
            "x-00004-of-00003.gguf",
            "x-0000a-of-00003.gguf",
        ] {
            assert_eq!(set_paths(Path::new(bad), 3), None, "{bad}");
        }
        assert_eq!(
            set_paths(Path::new("-00001-of-00003.gguf"), 3).unwrap().0,
            1
        );
    }
}

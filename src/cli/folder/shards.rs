//! Which output tensor goes to which shard file: HuggingFace's splitting rule
//! (`huggingface_hub.split_state_dict_into_shards_factory`, which `save_pretrained`
//! uses), its file names, and the `model.safetensors.index.json` it writes.

use std::collections::BTreeMap;

/// The default `--max-shard-size` (`save_pretrained`'s `"5GB"`).
pub const DEFAULT_MAX_SHARD: u64 = 5_000_000_000;

/// `--max-shard-size`: `5GB`, `500MB`, `2GiB`, `1.5GB`, or a byte count. `KB`..`TB`
/// are decimal as in HuggingFace (`5GB` = 5·10⁹ bytes), `KiB`..`TiB` binary.
///
/// # Errors
/// Text that is not a size, or zero.
pub fn parse_shard_size(s: &str) -> Result<u64, String> {
    let bad = || format!("`{s}` is not a shard size (expected e.g. 5GB, 500MB, 2GiB or 1000000)");
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return Err(bad()),
    };
    let value: f64 = num.parse().map_err(|_| bad())?;
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// Splits tensors of `sizes` bytes (in output order) into shards of indices, as
/// `huggingface_hub` does: a tensor larger than `max` gets a shard of its own; a
/// tensor that would take the current shard past `max` starts a new one.
pub fn split(sizes: &[u64], max: u64) -> Vec<Vec<usize>> {
    let mut shards = Vec::new();
    let mut current = Vec::new();
    let mut current_size = 0u64;
    for (i, &size) in sizes.iter().enumerate() {
        if size > max {
            shards.push(vec![i]);
            continue;
        }
        if current_size.saturating_add(size) > max {
            shards.push(std::mem::take(&mut current));
            current_size = 0;
        }
        current.push(i);
        current_size += size;
    }
    if !current.is_empty() {
        shards.push(current);
    }
    shards
}

/// The file name of shard `i` (0-based) of `n`: `model.safetensors` alone, else
/// `model-00001-of-00003.safetensors`.
pub fn file_name(i: usize, n: usize) -> String {
    if n == 1 {
        "model.safetensors".to_owned()
    } else {
        format!("model-{:05}-of-{:05}.safetensors", i + 1, n)
    }
}

/// `model.safetensors.index.json` as `save_pretrained` writes it (keys sorted,
/// indent 2, a final newline).
pub fn index_json(total_size: u64, weight_map: &BTreeMap<String, String>) -> Vec<u8> {
    let index = serde_json::json!({
        "metadata": {"total_size": total_size},
        "weight_map": weight_map,
    });
    let mut text = serde_json::to_string_pretty(&index).unwrap_or_default();
    text.push('\n');
    text.into_bytes()
}

/// `--part I/N`: 1 <= I <= N.
///
/// # Errors
/// Anything else.
pub fn parse_part(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("`{s}` is not a part (expected I/N with 1 <= I <= N, e.g. 2/8)");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let i: usize = i.trim().parse().map_err(|_| bad())?;
    let n: usize = n.trim().parse().map_err(|_| bad())?;
    if i == 0 || i > n {
        return Err(bad());
    }
    Ok((i, n))
}

/// Whether shard `shard` (0-based) belongs to part `i` of `n` (1-based): shards are
/// dealt round-robin, so every part knows its share from the input alone.
pub fn in_part(shard: usize, (i, n): (usize, usize)) -> bool {
    shard % n == i - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_huggingface_reads_them() {
        assert_eq!(parse_shard_size("5GB"), Ok(5_000_000_000));
        assert_eq!(parse_shard_size("500MB"), Ok(500_000_000));
        assert_eq!(parse_shard_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_shard_size("1.5kb"), Ok(1500));
        assert_eq!(parse_shard_size("1000"), Ok(1000));
        for bad in ["", "0", "GB", "5 XB", "-1GB", "nan"] {
            assert!(parse_shard_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn split_follows_the_hub_rule() {
        // 4 + 4 fit 10; 4 more would pass it; 20 is alone (before the open shard);
        // 4 + 1 + 9 would pass 10; 9 + 1 fit exactly.
        let shards = split(&[4, 4, 4, 20, 1, 9, 1], 10);
        assert_eq!(shards, vec![vec![0, 1], vec![3], vec![2, 4], vec![5, 6]]);
        assert_eq!(split(&[], 10), Vec::<Vec<usize>>::new());
        assert_eq!(split(&[10, 0], 10), vec![vec![0, 1]]);
    }

    #[test]
    fn names_parts_and_index() {
        assert_eq!(file_name(0, 1), "model.safetensors");
        assert_eq!(file_name(1, 12), "model-00002-of-00012.safetensors");
        assert_eq!(parse_part("2/3"), Ok((2, 3)));
        for bad in ["0/3", "4/3", "1", "a/b", "1/0"] {
            assert!(parse_part(bad).is_err(), "{bad}");
        }
        let mine: Vec<usize> = (0..7).filter(|&s| in_part(s, (2, 3))).collect();
        assert_eq!(mine, [1, 4]);
        let map = BTreeMap::from([("b".to_owned(), "f2".to_owned()), ("a".into(), "f1".into())]);
        let text = String::from_utf8(index_json(12, &map)).unwrap();
        assert_eq!(
            text,
            "{\n  \"metadata\": {\n    \"total_size\": 12\n  },\n  \"weight_map\": {\n    \"a\": \"f1\",\n    \"b\": \"f2\"\n  }\n}\n"
        );
    }
}

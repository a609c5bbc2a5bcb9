//! The output dtypes both tools write: bf16 and f32 (anamnesis also writes f16,
//! which the rows do not ask for).

use half::bf16;

/// An output element: dq's element type paired with anamnesis' output marker.
pub trait Out: dq::formats::Element {
    /// anamnesis' marker for the same dtype.
    type Amn: anamnesis::OutputElement;
    /// The dtype's name in the table.
    const NAME: &'static str;
}

impl Out for f32 {
    type Amn = anamnesis::F32Out;
    const NAME: &'static str = "f32";
}

impl Out for bf16 {
    type Amn = anamnesis::Bf16Out;
    const NAME: &'static str = "bf16";
}

/// Compares dq's `ours` (little-endian host) with anamnesis' bytes `theirs`, where
/// element `i` of `ours` is element `at(i)` of `theirs`: `None` when every element
/// is equal, else where they first differ and how many differ.
pub fn compare<T: Out>(ours: &[T], theirs: &[u8], at: impl Fn(usize) -> usize) -> Option<String> {
    let size = size_of::<T>();
    if theirs.len() != size_of_val(ours) {
        return Some(format!(
            "anamnesis wrote {} bytes, dq {}",
            theirs.len(),
            size_of_val(ours)
        ));
    }
    let ours: &[u8] = bytemuck::cast_slice(ours);
    let differs = |i: usize| {
        let j = at(i);
        ours[i * size..(i + 1) * size] != theirs[j * size..(j + 1) * size]
    };
    let n = ours.len() / size;
    let first = (0..n).find(|&i| differs(i))?;
    let count = (first..n).filter(|&i| differs(i)).count();
    Some(format!("{count} of {n} elements differ, first at {first}"))
}

#[cfg(test)]
mod tests {
    use super::compare;
    use half::bf16;

    fn le(xs: &[f32]) -> Vec<u8> {
        xs.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn equal_bits_pass_and_one_flipped_bit_fails() {
        let ours = [1.0f32, -2.5, 0.0, 3.25];
        assert_eq!(compare(&ours, &le(&ours), |i| i), None);
        let mut theirs = le(&ours);
        theirs[9] ^= 1;
        assert_eq!(
            compare(&ours, &theirs, |i| i).as_deref(),
            Some("1 of 4 elements differ, first at 2")
        );
        // -0.0 against 0.0: equal values, different bits.
        assert!(compare(&[0.0f32], &le(&[-0.0]), |i| i).is_some());
    }

    #[test]
    fn transposed_layouts_compare_element_by_element() {
        // dq's [N=2, K=3] against anamnesis' [K=3, N=2].
        let ours = [0.0f32, 1.0, 2.0, 10.0, 11.0, 12.0].map(bf16::from_f32);
        let theirs: Vec<u8> = [0.0f32, 10.0, 1.0, 11.0, 2.0, 12.0]
            .iter()
            .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
            .collect();
        let (k, n) = (3, 2);
        assert_eq!(compare(&ours, &theirs, |i| (i % k) * n + i / k), None);
        assert!(compare(&ours, &theirs, |i| i).is_some());
        assert!(compare(&ours, &theirs[2..], |i| i).is_some());
    }
}

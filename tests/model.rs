//! The main job as a library call: every weight of a small preset, every backend,
//! bit-identical outputs and the right counts.
use dq::Backend;
use dq::model::{self, ModelConfig, Scheme};

fn config(scheme: Scheme, group: usize) -> ModelConfig {
    ModelConfig {
        preset: model::preset("tiny").unwrap(),
        scheme,
        group,
        layers: 2,
        backends: vec![Backend::Auto, Backend::Generated, Backend::Jit],
        threads: 2,
        verify: true,
        seed: 7,
    }
}

/// The backends of the config that this build offers (explicit ones never fall back).
fn available(mut cfg: ModelConfig) -> ModelConfig {
    let b = dq::backends();
    cfg.backends
        .retain(|&k| k == Backend::Auto || b.get(k).is_some());
    cfg
}

#[test]
fn tiny_model_verifies_in_every_scheme() {
    for scheme in Scheme::ALL {
        for group in [32, 128] {
            let cfg = available(config(scheme, group));
            let rep = model::run(&cfg, |_, _, _| {}).unwrap();
            assert_eq!(
                rep.verified,
                Some(true),
                "{scheme:?} g{group}: {:?}",
                rep.mismatches
            );
            assert_eq!(rep.tensors, 14);
            let per_layer: u64 = cfg
                .preset
                .weights
                .iter()
                .map(|w| (w.out * w.inp) as u64)
                .sum();
            assert_eq!(rep.elements, 2 * per_layer);
            let dst_elem = scheme.dtypes().2.bits() as u64 / 8;
            assert_eq!(rep.dst_bytes, rep.elements * dst_elem);
            // The reference is appended for verification.
            assert_eq!(rep.backends.last().unwrap().backend, "reference");
            assert!(
                rep.backends
                    .iter()
                    .all(|b| b.dequant_s > 0.0 && b.gbps > 0.0)
            );
        }
    }
}

#[test]
fn jit_compiles_one_kernel_per_distinct_loop_nest() {
    if dq::backends().get(Backend::Jit).is_none() {
        eprintln!("SKIPPED: the jit backend is not built in");
        return;
    }
    let mut cfg = config(Scheme::U4Bf16, 64);
    cfg.backends = vec![Backend::Jit];
    cfg.verify = false;
    cfg.seed = 0x5eed_0001; // data does not change kernels; the cache may be warm from other tests
    let rep = model::run(&cfg, |_, _, _| {}).unwrap();
    let jit = &rep.backends[0];
    assert_eq!(jit.kernels_compiled + jit.kernels_reused, 14);
    // q/o, k/v, gate/up and down have 4 distinct shapes: at most 4 compiles.
    assert!(jit.kernels_compiled <= 4, "{jit:?}");
}

#[test]
fn a_bad_group_is_an_error_not_a_panic() {
    let mut cfg = config(Scheme::S4Bf16, 0);
    cfg.backends = vec![Backend::Reference];
    let err = model::run(&cfg, |_, _, _| {}).unwrap_err();
    assert!(
        matches!(err, dq::Error::GroupShapeEntry { dim: 1, got: 0 }),
        "{err}"
    );
}

/// `dq model --verify --json` on the tiny preset: bit equality and the counts.
#[test]
fn cli_model_verify_json_reports_counts() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dq"))
        .args([
            "model", "--preset", "tiny", "--scheme", "s4-f16", "--group", "64",
        ])
        .args(["--layers", "3", "--threads", "2", "--verify", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["verified"], true);
    assert_eq!(j["tensors"], 21);
    assert_eq!(j["layers"], 3);
    assert_eq!(j["group"], 64);
    assert_eq!(j["scheme"], "s4-f16");
    let per_layer: u64 = model::preset("tiny")
        .unwrap()
        .weights
        .iter()
        .map(|w| (w.out * w.inp) as u64)
        .sum();
    assert_eq!(j["elements"], 3 * per_layer);
    assert_eq!(j["dst_bytes"], 3 * per_layer * 2);
    let backends = j["backends"].as_array().unwrap();
    assert_eq!(backends.last().unwrap()["backend"], "reference");
    for b in backends {
        for k in [
            "kernels_compiled",
            "kernels_reused",
            "compile_ms",
            "dequant_s",
            "gbps",
        ] {
            assert!(b[k].is_number(), "{k} missing in {b}");
        }
    }
    if let Some(jit) = backends.iter().find(|b| b["backend"] == "jit") {
        let used =
            jit["kernels_compiled"].as_u64().unwrap() + jit["kernels_reused"].as_u64().unwrap();
        assert_eq!(used, 21);
    }
}

#[test]
fn cli_model_rejects_unknown_preset_with_exit_2() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dq"))
        .args(["model", "--preset", "gpt-9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown preset `gpt-9`") && err.lines().count() == 1,
        "{err}"
    );
}

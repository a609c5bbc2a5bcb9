//! The main job as a library call: every weight of a small preset, every backend,
//! bit-identical outputs and the right counts.
use crate::support;

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

/// The backends of the config that this build offers (explicit ones never fall
/// back); a missing one the build should have is reported through `path_unavailable`.
fn available(mut cfg: ModelConfig) -> ModelConfig {
    let b = dq::backends();
    cfg.backends.retain(|&k| support::in_build(k.name()));
    cfg.backends.retain(|&k| {
        let there = k == Backend::Auto || b.get(k).is_some();
        if !there {
            support::path_unavailable(&format!("model run on backend {}", k.name()));
        }
        there
    });
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

/// The JIT's compile counts over the tiny model, in a process of its own (`dq
/// model`: a cold cache, and no other test compiling meanwhile): the 14 weights of
/// 2 layers have 4 distinct loop nests (q/o, k/v, gate/up, down), so 4 compiles in
/// all and 24 reuses over the two JIT entries (they share the cache; each tensor
/// starts with the next entry in turn, so either can be the one that compiles).
#[test]
#[cfg(feature = "jit")]
fn jit_compiles_one_kernel_per_distinct_loop_nest() {
    if dq::backends().get(Backend::Jit).is_none() {
        support::path_unavailable("model run on backend jit");
        return;
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dq"))
        .env("DQ_TUNING", "off")
        .args([
            "model", "--preset", "tiny", "--scheme", "u4-bf16", "--group", "64",
        ])
        .args(["--layers", "2", "--backend", "jit,jit", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let counts: Vec<(&str, u64, u64)> = (j["backends"].as_array().unwrap().iter())
        .map(|b| {
            let n = |k: &str| b[k].as_u64().unwrap();
            let name = b["backend"].as_str().unwrap();
            (name, n("kernels_compiled"), n("kernels_reused"))
        })
        .collect();
    assert!(counts.iter().all(|c| c.0 == "jit"), "{j}");
    let total = |f: fn(&(&str, u64, u64)) -> u64| counts.iter().map(f).sum::<u64>();
    assert_eq!((total(|c| c.1), total(|c| c.2)), (4, 24), "{j}");
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
        .env("DQ_TUNING", "off")
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
        .env("DQ_TUNING", "off")
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

//! Folder output's atomicity under SIGKILL: `dq convert IN OUT_DIR` killed while it
//! writes a shard leaves no OUT_DIR (only its temporary folder), and the next run
//! deletes that folder and writes OUT_DIR.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A safetensors file of `count` F16 tensors of 4 Mi elements (8 MiB each).
fn big_safetensors(path: &Path, count: usize) {
    let n = 4usize << 20;
    let mut header = serde_json::Map::new();
    for i in 0..count {
        let (start, end) = (i * 2 * n, (i + 1) * 2 * n);
        header.insert(
            format!("t{i:02}"),
            serde_json::json!({"dtype": "F16", "shape": [n], "data_offsets": [start, end]}),
        );
    }
    let mut head = serde_json::to_vec(&header).unwrap();
    head.resize(head.len().next_multiple_of(8), b' ');
    let mut bytes = (head.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(&head);
    // 0x3C00 is 1.0 in f16.
    bytes.extend(std::iter::repeat_n([0x00, 0x3C], count * n).flatten());
    fs::write(path, bytes).unwrap();
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// The temporary folder of a run in `dir` holding a file with bytes in it.
fn writing(dir: &Path) -> bool {
    names(dir)
        .iter()
        .filter(|n| n.starts_with(".dq-convert-"))
        .any(|t| {
            fs::read_dir(dir.join(t))
                .map(|entries| {
                    entries
                        .flatten()
                        .any(|e| e.metadata().is_ok_and(|m| m.len() > 0))
                })
                .unwrap_or(false)
        })
}

/// Starts the conversion and SIGKILLs it once it writes; `false` if it finished first.
fn kill_while_writing(args: &[&str], dir: &Path) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dq"))
        .env("DQ_TUNING", "off")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if writing(dir) {
            child.kill().unwrap(); // SIGKILL on Unix
            let status = child.wait().unwrap();
            return status.code().is_none();
        }
        if child.try_wait().unwrap().is_some() || start.elapsed() > Duration::from_secs(60) {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn a_run_killed_mid_write_leaves_no_folder_and_the_next_run_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    for (attempt, count) in [6, 12, 24, 48].into_iter().enumerate() {
        let input = dir.path().join(format!("in{attempt}.safetensors"));
        big_safetensors(&input, count);
        let out = work.join("m");
        let args = ["convert", input.to_str().unwrap(), out.to_str().unwrap()];
        let shards = ["--max-shard-size", "10MB", "--threads", "1"];
        let all: Vec<&str> = args.iter().chain(&shards).copied().collect();
        if !kill_while_writing(&all, &work) {
            // Finished before the kill: try a larger input.
            let _ = fs::remove_dir_all(&out);
            fs::remove_file(&input).unwrap();
            continue;
        }
        let left = names(&work);
        assert!(!out.exists(), "killed mid-write, OUT_DIR exists: {left:?}");
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(left[0].starts_with(".dq-convert-") && left[0].ends_with(".tmp"));
        // The next run deletes the killed run's folder and writes OUT_DIR.
        let o = Command::new(env!("CARGO_BIN_EXE_dq"))
            .env("DQ_TUNING", "off")
            .args(&all)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(names(&work), ["m"]);
        assert!(names(&out).len() > 2, "{:?}", names(&out));
        return;
    }
    panic!("the conversion always finished before it could be killed");
}

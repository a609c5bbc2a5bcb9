//! Choices remembered between runs: a race decided once on this machine is not
//! run again by the next process, so `auto` keeps the same backend, block form
//! and store strategy for the same case from run to run (a race between two
//! candidates within timing noise of each other could otherwise end either way).
//!
//! The file is plain text, one choice a line, `cpu<TAB>race<TAB>key<TAB>choice`,
//! where `cpu` names this machine and build ([`fingerprint`]): the same file may
//! serve several machines (a shared home directory), and a choice made on one
//! CPU, another dq version, or under another `DQ_ISA`/`DQ_STORE`, is never used on
//! another. Malformed lines are ignored; a file over [`MAX_BYTES`] is ignored
//! whole. Writes go to a temporary file renamed over the old one, so a reader
//! never sees half a file; failures to read or write only mean nothing is
//! remembered.
//!
//! Where: `DQ_TUNING=<path>` ([`crate::env`]), `DQ_TUNING=off` for none; else the
//! file a program asked for with [`remember_by_default`] (the `dq` CLI: the user's
//! cache directory, [`default_path`]); else none (a library is silent unless asked).
//! Delete the file to race again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// A larger file is not read (nothing in it is remembered).
pub const MAX_BYTES: u64 = 1 << 20;

/// The remembered choices of one file: `(race, key)` -> choice for this
/// fingerprint, and every other fingerprint's lines kept as read.
#[derive(Debug, Default, PartialEq)]
pub struct Choices {
    mine: BTreeMap<(String, String), usize>,
    others: Vec<String>,
}

impl Choices {
    /// Parses `text` for the machine `cpu` (malformed lines are dropped).
    pub fn parse(text: &str, cpu: &str) -> Choices {
        let mut c = Choices::default();
        for line in text.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            let [who, race, key, choice] = f[..] else {
                continue;
            };
            let Ok(choice) = choice.parse::<usize>() else {
                continue;
            };
            if who == cpu {
                c.mine.insert((race.to_owned(), key.to_owned()), choice);
            } else {
                c.others.push(line.to_owned());
            }
        }
        c
    }

    /// The file's text, for the machine `cpu`.
    pub fn render(&self, cpu: &str) -> String {
        let mut s = String::new();
        for line in &self.others {
            s += line;
            s.push('\n');
        }
        for ((race, key), choice) in &self.mine {
            s += &format!("{cpu}\t{race}\t{key}\t{choice}\n");
        }
        s
    }

    /// The choice remembered for `key` of `race`.
    pub fn get(&self, race: &str, key: &str) -> Option<usize> {
        self.mine.get(&(race.to_owned(), key.to_owned())).copied()
    }

    /// Remembers `choice`; false when it was already remembered so.
    pub fn set(&mut self, race: &str, key: &str, choice: usize) -> bool {
        let k = (clean(race), clean(key));
        self.mine.insert(k, choice) != Some(choice)
    }
}

/// `s` with tabs and line breaks (the file's separators) replaced by spaces.
fn clean(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

/// A file of choices and this machine's fingerprint.
struct Memory {
    path: PathBuf,
    cpu: String,
    choices: Mutex<Choices>,
}

static DEFAULT: OnceLock<PathBuf> = OnceLock::new();
static MEMORY: OnceLock<Option<Memory>> = OnceLock::new();

/// Asks for choices to be remembered in `path` unless `DQ_TUNING` says
/// otherwise. Call it before the first race (later calls change nothing);
/// false when too late or already asked.
pub fn remember_by_default(path: PathBuf) -> bool {
    MEMORY.get().is_none() && DEFAULT.set(path).is_ok()
}

/// The user's cache directory's `dq/tuning.tsv`: `$XDG_CACHE_HOME`, else
/// `$HOME/.cache`; `None` when neither is set.
pub fn default_path() -> Option<PathBuf> {
    let var = |n| {
        std::env::var_os(n)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let dir = var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))?;
    Some(dir.join("dq").join("tuning.tsv"))
}

/// The file choices are remembered in, if any.
pub fn file() -> Option<&'static Path> {
    memory().map(|m| m.path.as_path())
}

fn memory() -> Option<&'static Memory> {
    MEMORY
        .get_or_init(|| {
            let path = match crate::env::tuning() {
                Some("off") => return None,
                Some(p) => PathBuf::from(p),
                None => DEFAULT.get()?.clone(),
            };
            let cpu = fingerprint();
            let text = read(&path).unwrap_or_default();
            let choices = Mutex::new(Choices::parse(&text, &cpu));
            Some(Memory { path, cpu, choices })
        })
        .as_ref()
}

fn read(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The choice remembered for `key` of `race`, if it is one of `candidates`.
pub fn recall(race: &str, key: &str, candidates: usize) -> Option<usize> {
    let m = memory()?;
    let c = m.choices.lock().unwrap_or_else(|e| e.into_inner());
    c.get(race, &clean(key)).filter(|&i| i < candidates)
}

/// Remembers `choice` for `key` of `race` and rewrites the file.
pub fn remember(race: &str, key: &str, choice: usize) {
    let Some(m) = memory() else { return };
    let mut c = m.choices.lock().unwrap_or_else(|e| e.into_inner());
    if c.set(race, key, choice) {
        // Under the lock: writers in this process take turns.
        let _ = write(&m.path, &c.render(&m.cpu));
    }
}

/// Writes `text` to `path` through a temporary file in the same directory.
fn write(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// This machine and build: the CPU's vendor, brand, family, model and stepping
/// (CPUID), dq's version, and the `DQ_ISA` and `DQ_STORE` settings (they change
/// what the candidates are).
pub fn fingerprint() -> String {
    let env = |v: Option<&str>| v.unwrap_or("-").to_owned();
    let s = format!(
        "{} dq{} isa={} store={}",
        cpu_name(),
        env!("CARGO_PKG_VERSION"),
        env(crate::env::isa()),
        env(crate::env::store()),
    );
    clean(&s)
}

#[cfg(target_arch = "x86_64")]
fn cpu_name() -> String {
    use core::arch::x86_64::__cpuid;
    let regs = |leaf| {
        let r = __cpuid(leaf);
        [r.eax, r.ebx, r.ecx, r.edx]
    };
    let v = regs(0);
    let vendor: Vec<u8> = [v[1], v[3], v[2]]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    let mut brand = Vec::new();
    if __cpuid(0x8000_0000).eax >= 0x8000_0004 {
        for leaf in 0x8000_0002..=0x8000_0004 {
            brand.extend(regs(leaf).iter().flat_map(|r| r.to_le_bytes()));
        }
    }
    let sig = regs(1)[0];
    let family = ((sig >> 8) & 0xf) + ((sig >> 20) & 0xff);
    let model = ((sig >> 4) & 0xf) | ((sig >> 12) & 0xf0);
    let text = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .trim_matches(['\0', ' '])
            .to_owned()
    };
    format!(
        "{} {} family {family} model {model} stepping {}",
        text(&vendor),
        text(&brand),
        sig & 0xf
    )
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_name() -> String {
    std::env::consts::ARCH.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_keeps_other_machines_lines_and_drops_malformed_ones() {
        let text = "me\tblock\tQ4_0/avx512/f32\t2\n\
                    other cpu\tblock\tQ4_0/avx512/f32\t1\n\
                    me\tblock\tbad\tx\n\
                    me\ttoo\tfew\n\
                    me\tgguf\tQ6_K/bf16\t1\n";
        let mut c = Choices::parse(text, "me");
        assert_eq!(c.get("block", "Q4_0/avx512/f32"), Some(2));
        assert_eq!(c.get("gguf", "Q6_K/bf16"), Some(1));
        assert_eq!(c.get("block", "bad"), None);
        assert!(!c.set("gguf", "Q6_K/bf16", 1), "already so");
        assert!(c.set("gguf", "Q8_0\t/bf16", 0));
        let again = Choices::parse(&c.render("me"), "me");
        assert_eq!(again, c);
        assert_eq!(again.get("gguf", "Q8_0 /bf16"), Some(0));
        assert!(
            c.render("me")
                .contains("other cpu\tblock\tQ4_0/avx512/f32\t1\n")
        );
        assert_eq!(Choices::parse(&c.render("me"), "other cpu").mine.len(), 1);
    }

    #[test]
    fn writes_replace_the_file_whole() {
        let dir = std::env::temp_dir().join(format!("dq-memory-{}", std::process::id()));
        let path = dir.join("sub").join("tuning.tsv");
        write(&path, "a\tb\tc\t1\n").expect("write");
        write(&path, "a\tb\tc\t2\n").expect("rewrite");
        assert_eq!(read(&path).as_deref(), Some("a\tb\tc\t2\n"));
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
        std::fs::write(&path, vec![b'x'; MAX_BYTES as usize + 1]).unwrap();
        assert_eq!(read(&path), None, "too large: ignored");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_fingerprint_names_the_cpu_and_the_build() {
        let f = fingerprint();
        assert!(f.contains(concat!("dq", env!("CARGO_PKG_VERSION"))), "{f}");
        assert!(f.contains(" isa=") && f.contains(" store="), "{f}");
        assert!(!f.contains('\t') && !f.contains('\n'), "{f}");
        #[cfg(target_arch = "x86_64")]
        assert!(f.contains(" family ") && f.contains(" model "), "{f}");
    }
}

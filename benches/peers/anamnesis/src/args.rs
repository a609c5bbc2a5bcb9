//! The command line: `--flag value` pairs and bare switches, every name checked.

/// Options that take a value.
const VALUES: [&str; 17] = [
    "--min-time",
    "--elements",
    "--types",
    "--k",
    "--n",
    "--group",
    "--threads",
    "--skip",
    "--amn",
    "--dq",
    "--model",
    "--model-gb",
    "--model-elements",
    "--file-threads",
    "--runs",
    "--scratch",
    "--write-model",
];

/// Options without a value.
const SWITCHES: [&str; 4] = ["--json", "--base-pages", "--help", "-h"];

/// The parsed command line.
#[derive(Debug)]
pub struct Args(Vec<String>);

impl Args {
    /// `args`, refused when a name is unknown or a value is missing.
    pub fn new(args: Vec<String>) -> Result<Args, String> {
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            if VALUES.contains(&a) {
                if i + 1 == args.len() {
                    return Err(format!("{a} needs a value"));
                }
                i += 2;
            } else if SWITCHES.contains(&a) {
                i += 1;
            } else {
                return Err(format!("unknown option {a} (see --help)"));
            }
        }
        Ok(Args(args))
    }

    /// The value of `name`, if given.
    pub fn value(&self, name: &str) -> Option<&str> {
        let i = self.0.iter().position(|a| a == name)?;
        self.0.get(i + 1).map(String::as_str)
    }

    /// The value of `name` parsed, or `default`.
    pub fn parse<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        self.value(name).map_or(Ok(default), |v| {
            v.parse()
                .map_err(|_| format!("{name}: not a valid value: {v}"))
        })
    }

    /// The comma-separated value of `name`, if given.
    pub fn list(&self, name: &str) -> Option<Vec<String>> {
        self.value(name)
            .map(|v| v.split(',').map(str::to_owned).collect())
    }

    /// Whether switch `name` is given.
    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|a| a == name)
    }
}

#[cfg(test)]
mod tests {
    use super::Args;

    fn args(a: &[&str]) -> Result<Args, String> {
        Args::new(a.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn names_are_checked_and_values_read() {
        let a = args(&["--json", "--types", "Q4_0,Q8_0", "--runs", "3"]).unwrap();
        assert!(a.has("--json"));
        assert_eq!(a.list("--types").unwrap(), ["Q4_0", "Q8_0"]);
        assert_eq!(a.parse("--runs", 1usize), Ok(3));
        assert_eq!(a.parse("--k", 7usize), Ok(7));
        assert!(
            args(&["--type", "Q4_0"])
                .unwrap_err()
                .contains("unknown option --type")
        );
        assert!(args(&["--runs"]).unwrap_err().contains("needs a value"));
        assert!(
            args(&["--runs", "x"])
                .unwrap()
                .parse("--runs", 1usize)
                .is_err()
        );
    }
}

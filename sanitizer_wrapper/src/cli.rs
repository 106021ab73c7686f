//! The option values (`Options`), and the one parser that both the command
//! line and the configuration file go through.
//!
//! `sanitizer_wrapper [OPTIONS] [--] TEST [ARGS...]`
//!
//! [`classify`] tells what one word is: an option with its value, an option
//! whose value is the next word, `--help`, `--version`, `--`, or the first word
//! of the test command. [`parse`] walks argv with it; the configuration file
//! (`config`) runs each of its lines through it and accepts only the
//! `--name=value` form. The first word that is not an option (or `--`) ends
//! the options; it and everything after it belong to the test and are passed
//! on byte for byte. Parsing borrows from argv and never allocates.

use crate::error::Error;
use crate::opt::Opt;
use wrapper_common::argv::Argv;

pub const USAGE: &str = "\
usage: sanitizer_wrapper [OPTIONS] [--] TEST [ARGS...]

Sets up ASAN_OPTIONS, LSAN_OPTIONS and TSAN_OPTIONS with files from the Bazel
runfiles and execs TEST (or the --run-under wrapper with TEST). Each variable
becomes its base options, then the added paths, then the value it already
had, joined by ':'; the sanitizers take the last value of a repeated key, so
the test's own setting wins. A variable nothing is configured for is left
alone; with nothing configured at all, TEST is run unchanged.

options (each also read from <argv[0]>.sanitizer_wrapper.conf, one
--NAME=VALUE per line; the command line wins; an empty value switches one off):
  --asan-options=OPTS       base ASAN_OPTIONS, e.g. detect_leaks=1:verbosity=1
  --lsan-options=OPTS       base LSAN_OPTIONS
  --tsan-options=OPTS       base TSAN_OPTIONS
  --asan-suppressions=PATH  adds suppressions=<absolute path> to ASAN_OPTIONS
  --lsan-suppressions=PATH  adds suppressions=<absolute path> to LSAN_OPTIONS
  --tsan-suppressions=PATH  adds suppressions=<absolute path> to TSAN_OPTIONS
  --symbolizer=PATH         adds external_symbolizer_path=<absolute path> to
                            ASAN_OPTIONS and TSAN_OPTIONS
  --run-under=PATH          execs the wrapper at PATH with TEST and ARGS
  --help, -h                this text
  --version                 the version
PATH is a runfiles path (<repo>/<path>, as rlocation takes it) or absolute.

runfiles: the directory $RUNFILES_DIR, else $TEST_SRCDIR, else
  <argv[0]>.runfiles; when the file is not there, the manifest
  $RUNFILES_MANIFEST_FILE, else <dir>/MANIFEST, else
  <argv[0]>.runfiles_manifest.
exit: the test's own status; 2 bad option, bad configuration, a configured
  file not found, or a suppression list (symbolizer) that is not a regular
  file this user may read (run); 126 TEST not executable; 127 TEST not found.
";

/// Option values as given, borrowed from argv or from a configuration file.
#[derive(Debug, Default, Clone, Copy)]
pub struct Options<'a> {
    values: [Option<&'a [u8]>; Opt::COUNT],
}

impl<'a> Options<'a> {
    pub fn set(&mut self, opt: Opt, value: &'a [u8]) {
        self.values[opt.index()] = Some(value);
    }

    /// The value of `opt` when it is configured: given and not empty. An
    /// empty value is kept by [`set`](Self::set), so that `--asan-options=`
    /// on the command line switches off what the configuration file set.
    pub fn get(&self, opt: Opt) -> Option<&'a [u8]> {
        self.values[opt.index()].filter(|v| !v.is_empty())
    }

    /// True when no option is configured: the test runs unchanged.
    pub fn is_empty(&self) -> bool {
        Opt::ALL.iter().all(|&opt| self.get(opt).is_none())
    }

    /// These options with every option that `later` gives (even empty)
    /// replacing the same one here.
    pub fn overridden_by(mut self, later: &Options<'a>) -> Options<'a> {
        for (mine, theirs) in self.values.iter_mut().zip(later.values) {
            if theirs.is_some() {
                *mine = theirs;
            }
        }
        self
    }
}

/// What one word (an argument, or a configuration line) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word<'a> {
    /// `--name=value`.
    WithValue(Opt, &'a [u8]),
    /// `--name`: the value is the next word.
    Bare(Opt),
    Help,
    Version,
    /// `--`.
    EndOfOptions,
    /// Not an option: the first word of the test command.
    Command,
    /// Looks like an option, but is none of them.
    Unknown,
}

pub fn classify(word: &[u8]) -> Word<'_> {
    match word {
        b"--" => return Word::EndOfOptions,
        b"--help" | b"-h" => return Word::Help,
        b"--version" => return Word::Version,
        // `-` alone is a file name (as for most tools), not an option.
        _ if word.len() < 2 || word[0] != b'-' => return Word::Command,
        _ => {}
    }
    for opt in Opt::ALL {
        let Some(rest) = word.strip_prefix(opt.name().as_bytes()) else { continue };
        if rest.is_empty() {
            return Word::Bare(opt);
        }
        if let Some(value) = rest.strip_prefix(b"=") {
            return Word::WithValue(opt, value);
        }
    }
    Word::Unknown
}

#[derive(Debug)]
pub enum Invocation {
    /// Run the test found at argv index `command`.
    Run {
        options: Options<'static>,
        command: usize,
    },
    Help,
    Version,
}

pub fn parse(argv: &Argv) -> Result<Invocation, Error> {
    let mut options = Options::default();
    let mut i = 1;
    while let Some(arg) = argv.get(i) {
        let word = arg.to_bytes();
        match classify(word) {
            Word::WithValue(opt, value) => options.set(opt, value),
            Word::Bare(opt) => {
                let value = argv.get(i + 1).ok_or(Error::MissingValue(opt))?;
                options.set(opt, value.to_bytes());
                i += 1;
            }
            Word::Help => return Ok(Invocation::Help),
            Word::Version => return Ok(Invocation::Version),
            Word::EndOfOptions => {
                i += 1;
                break;
            }
            Word::Command => break,
            Word::Unknown => return Err(Error::UnknownOption(word)),
        }
        i += 1;
    }
    if i >= argv.len() {
        return Err(Error::NoCommand);
    }
    Ok(Invocation::Run { options, command: i })
}

#[cfg(test)]
mod tests {
    use super::*;

    use test_support::leaked_argv as argv;

    fn run(words: &[&str]) -> (Options<'static>, usize) {
        match parse(&argv(words)).unwrap() {
            Invocation::Run { options, command } => (options, command),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_option_in_both_forms() {
        for opt in Opt::ALL {
            let joined = format!("{}=v1", opt.name());
            let (o, cmd) = run(&["sw", &joined, "./t"]);
            assert_eq!(o.get(opt), Some(&b"v1"[..]), "{joined}");
            assert_eq!(cmd, 2);
            let (o, cmd) = run(&["sw", opt.name(), "v2", "./t"]);
            assert_eq!(o.get(opt), Some(&b"v2"[..]), "{}", opt.name());
            assert_eq!(cmd, 3);
            for other in Opt::ALL.into_iter().filter(|&o| o != opt) {
                assert_eq!(o.get(other), None);
            }
        }
    }

    #[test]
    fn options_end_at_the_test_command() {
        let (o, cmd) = run(&["sw", "--asan-options=a=1:b=2", "./t", "--tsan-options=x", "--help"]);
        assert_eq!(o.get(Opt::AsanOptions), Some(&b"a=1:b=2"[..]));
        assert_eq!(o.get(Opt::TsanOptions), None);
        assert_eq!(cmd, 2);
    }

    #[test]
    fn double_dash_ends_options() {
        let (o, cmd) = run(&["sw", "--symbolizer=ws/llvm-symbolizer", "--", "--looks-like-an-option"]);
        assert_eq!(o.get(Opt::Symbolizer), Some(&b"ws/llvm-symbolizer"[..]));
        assert_eq!(cmd, 3);
    }

    #[test]
    fn two_word_value_may_start_with_a_dash() {
        let (o, cmd) = run(&["sw", "--run-under", "--odd", "t"]);
        assert_eq!(o.get(Opt::RunUnder), Some(&b"--odd"[..]));
        assert_eq!(cmd, 3);
    }

    #[test]
    fn last_value_wins_and_empty_means_off() {
        let (o, _) = run(&["sw", "--asan-options=a=1", "--asan-options=a=2", "t"]);
        assert_eq!(o.get(Opt::AsanOptions), Some(&b"a=2"[..]));
        let (o, _) = run(&["sw", "--asan-options=a=1", "--asan-options=", "t"]);
        assert_eq!(o.get(Opt::AsanOptions), None);
        assert!(o.is_empty());
    }

    #[test]
    fn later_options_override_earlier_ones() {
        let mut file = Options::default();
        file.set(Opt::AsanOptions, b"from_file=1");
        file.set(Opt::TsanOptions, b"kept=1");
        file.set(Opt::RunUnder, b"ws/chain");
        let mut command_line = Options::default();
        command_line.set(Opt::AsanOptions, b"from_cli=1");
        command_line.set(Opt::RunUnder, b"");
        let merged = file.overridden_by(&command_line);
        assert_eq!(merged.get(Opt::AsanOptions), Some(&b"from_cli=1"[..]));
        assert_eq!(merged.get(Opt::TsanOptions), Some(&b"kept=1"[..]));
        assert_eq!(merged.get(Opt::RunUnder), None, "an empty value switches the option off");
    }

    #[test]
    fn classify_words() {
        assert_eq!(classify(b"--asan-options=x=1"), Word::WithValue(Opt::AsanOptions, b"x=1"));
        assert_eq!(classify(b"--asan-options="), Word::WithValue(Opt::AsanOptions, b""));
        assert_eq!(classify(b"--asan-options"), Word::Bare(Opt::AsanOptions));
        assert_eq!(classify(b"--asan-optionsx"), Word::Unknown);
        assert_eq!(classify(b"--asan"), Word::Unknown);
        assert_eq!(classify(b"-x"), Word::Unknown);
        assert_eq!(classify(b"-"), Word::Command);
        assert_eq!(classify(b""), Word::Command);
        assert_eq!(classify(b"./pkg/t"), Word::Command);
        assert_eq!(classify(b"--"), Word::EndOfOptions);
        assert_eq!(classify(b"-h"), Word::Help);
        assert_eq!(classify(b"--version"), Word::Version);
    }

    #[test]
    fn errors() {
        assert!(matches!(parse(&argv(&["sw"])), Err(Error::NoCommand)));
        assert!(matches!(parse(&argv(&[])), Err(Error::NoCommand)));
        assert!(matches!(parse(&argv(&["sw", "--asan-options=a"])), Err(Error::NoCommand)));
        assert!(matches!(parse(&argv(&["sw", "--"])), Err(Error::NoCommand)));
        assert!(matches!(parse(&argv(&["sw", "--symbolizer"])), Err(Error::MissingValue(Opt::Symbolizer))));
        assert!(matches!(parse(&argv(&["sw", "--asan=1", "t"])), Err(Error::UnknownOption(b"--asan=1"))));
    }

    #[test]
    fn help_and_version() {
        assert!(matches!(parse(&argv(&["sw", "--help", "t"])), Ok(Invocation::Help)));
        assert!(matches!(parse(&argv(&["sw", "-h"])), Ok(Invocation::Help)));
        assert!(matches!(parse(&argv(&["sw", "--version"])), Ok(Invocation::Version)));
        assert!(matches!(parse(&argv(&["sw", "t", "--help"])), Ok(Invocation::Run { command: 1, .. })));
    }
}

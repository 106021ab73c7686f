//! The wrapper's options by name, as the command line, the configuration
//! file and the error messages speak of them. It imports nothing from the
//! crate, so that `error` can name an option without depending on the
//! parser (`cli`): imports run one way, from `lib` down to `error` and this.

/// The options; each takes one value, and a later one replaces an earlier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    AsanOptions,
    LsanOptions,
    TsanOptions,
    AsanSuppressions,
    LsanSuppressions,
    TsanSuppressions,
    Symbolizer,
    RunUnder,
}

impl Opt {
    pub const COUNT: usize = 8;

    pub const ALL: [Opt; Opt::COUNT] = [
        Opt::AsanOptions,
        Opt::LsanOptions,
        Opt::TsanOptions,
        Opt::AsanSuppressions,
        Opt::LsanSuppressions,
        Opt::TsanSuppressions,
        Opt::Symbolizer,
        Opt::RunUnder,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Opt::AsanOptions => "--asan-options",
            Opt::LsanOptions => "--lsan-options",
            Opt::TsanOptions => "--tsan-options",
            Opt::AsanSuppressions => "--asan-suppressions",
            Opt::LsanSuppressions => "--lsan-suppressions",
            Opt::TsanSuppressions => "--tsan-suppressions",
            Opt::Symbolizer => "--symbolizer",
            Opt::RunUnder => "--run-under",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

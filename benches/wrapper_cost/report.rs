//! The tables the benchmark prints, and the machine it ran on.

use super::*;

pub(crate) fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

pub(crate) fn mib(kib: i64) -> String {
    format!("{:.2} MiB", kib as f64 / 1024.0)
}

pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

pub(crate) fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.3} ms")
    }
}

/// One table row, as cells; a heading row has one cell, spanning the table.
pub(crate) struct Row {
    pub(crate) cells: Vec<String>,
    pub(crate) heading: bool,
}

pub(crate) struct Table {
    pub(crate) header: Vec<String>,
    pub(crate) rows: Vec<Row>,
}

impl Table {
    pub(crate) fn new(header: &[&str]) -> Table {
        Table { header: header.iter().map(|s| s.to_string()).collect(), rows: Vec::new() }
    }

    pub(crate) fn push(&mut self, cells: Vec<String>) {
        self.rows.push(Row { cells, heading: false });
    }

    pub(crate) fn heading(&mut self, title: String) {
        self.rows.push(Row { cells: vec![title], heading: true });
    }

    pub(crate) fn text(&self) -> String {
        let n = self.header.len();
        let mut width = vec![0; n];
        let rows = || std::iter::once((&self.header, false)).chain(self.rows.iter().map(|r| (&r.cells, r.heading)));
        for (cells, _) in rows().filter(|r| !r.1) {
            for (i, c) in cells.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for (cells, heading) in rows() {
            if heading {
                let _ = writeln!(out, "{}:", cells[0]);
                continue;
            }
            let mut line = String::new();
            for (i, c) in cells.iter().enumerate() {
                let pad = width[i] - c.chars().count();
                if i == 0 {
                    let _ = write!(line, "  {c}{}", " ".repeat(pad));
                } else {
                    let _ = write!(line, "  {}{c}", " ".repeat(pad));
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out
    }

    pub(crate) fn markdown(&self) -> String {
        let mut out = format!("| {} |\n", self.header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(self.header.len()));
        for r in &self.rows {
            if r.heading {
                let _ = writeln!(out, "| **{}** |{}", r.cells[0], " |".repeat(self.header.len() - 1));
            } else {
                let _ = writeln!(out, "| {} |", r.cells.join(" | "));
            }
        }
        out
    }
}

pub(crate) fn case_table(groups: &[&Group]) -> Table {
    let mut t = Table::new(&["case", "x floor", "x direct", "median", "p90", "CPU", "peak RSS", "target"]);
    for g in groups {
        t.heading(g.title.clone());
        for c in &g.cases {
            let (floor_key, direct_key) = c.key.reference();
            let floor = g.median(floor_key).unwrap();
            let direct = g.median(direct_key).unwrap();
            let s = stats(&c.samples);
            let (xf, xd) = (s.median_ms / floor, s.median_ms / direct);
            let mut target = Vec::new();
            if let Some(limit) = c.key.floor_target().filter(|_| g.judged) {
                target.push(format!("<= {limit:.2}x floor {}", verdict(xf <= limit)));
            }
            let rss = c.rss_kib.unwrap_or(0);
            if c.key.is_wrapper() {
                target.push(format!("RSS <= 2 MiB {}", verdict(rss <= RSS_LIMIT_KIB)));
            }
            t.push(vec![
                c.label.clone(),
                format!("{xf:.2}"),
                format!("{xd:.2}"),
                ms(s.median_ms),
                ms(s.p90_ms),
                ms(s.cpu_ms),
                mib(rss),
                target.join(", "),
            ]);
        }
    }
    t
}

pub(crate) fn classic_table(small: &Group, large: &Group) -> Table {
    let mut t = Table::new(&[
        "runfiles tree",
        "classic / ours (sysfs)",
        "classic",
        "ours (sysfs)",
        "classic / ours (rocminfo in the runfiles)",
        "target",
    ]);
    let row = |g: &Group, limit: f64, t: &mut Table| {
        let classic = g.median(Key::Classic).unwrap();
        let ours = g.median(Key::PgeKfd).unwrap();
        let mut rocminfo = Vec::new();
        for key in [Key::PgeRocminfoManifest, Key::PgeRocminfoWalk] {
            if let Some(m) = g.median(key) {
                let how = match key {
                    Key::PgeRocminfoWalk => "walk, no MANIFEST",
                    _ => "MANIFEST",
                };
                rocminfo.push(format!("{:.1}x ({how}, {})", classic / m, ms(m)));
            }
        }
        let ratio = classic / ours;
        t.push(vec![
            g.title.clone(),
            format!("{ratio:.1}x"),
            ms(classic),
            ms(ours),
            rocminfo.join("; "),
            format!(">= {limit:.0}x {}", verdict(ratio >= limit)),
        ]);
    };
    row(small, 10.0, &mut t);
    row(large, 30.0, &mut t);
    t
}

pub(crate) fn size_table(bins: &Bins) -> Table {
    let mut t = Table::new(&["static binary (release)", "bytes", "target"]);
    let mut rows = vec![
        ("parallel_gpu_execute".to_string(), Some(bins.pge.clone()), true),
        ("sanitizer_wrapper".to_string(), bins.san.clone(), true),
        ("tag_filters".to_string(), Some(bins.tag.clone()), true),
    ];
    if let Some(musl) = &bins.musl_wrappers {
        for (name, path) in musl.all() {
            rows.push((format!("{name} (x86_64 musl release)"), Some(path.clone()), true));
        }
    }
    rows.push(("floor (C, gcc -static)".to_string(), Some(bins.floor.clone()), false));
    for (name, path, target) in rows {
        let Some(path) = path else {
            t.push(vec![name, "not built".to_string(), "MISS".to_string()]);
            continue;
        };
        let len = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let v = if target { format!("<= 1.0 MB {}", verdict(len <= SIZE_LIMIT)) } else { "(for scale)".to_string() };
        t.push(vec![name, thousands(len), v]);
    }
    t
}

pub(crate) fn first_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// The CPU model, from `/proc/cpuinfo`.
pub(crate) fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".to_string())
}

pub(crate) fn machine() -> String {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let model = cpu_model();
    // SAFETY: all-zero utsname is a valid out-buffer for uname.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer; the fields are NUL-terminated on success.
    let kernel = if unsafe { libc::uname(&mut u) } == 0 {
        // SAFETY: as above.
        unsafe {
            format!(
                "{} {}",
                CStr::from_ptr(u.sysname.as_ptr()).to_string_lossy(),
                CStr::from_ptr(u.release.as_ptr()).to_string_lossy()
            )
        }
    } else {
        "?".to_string()
    };
    // SAFETY: returns a static NUL-terminated string.
    let glibc = unsafe { CStr::from_ptr(libc::gnu_get_libc_version()) }.to_string_lossy().into_owned();
    format!(
        "{cpus} CPUs ({model}), {kernel}, glibc {glibc}, {}, {}",
        first_line("rustc", &["--version"]),
        first_line("cc", &["--version"])
    )
}

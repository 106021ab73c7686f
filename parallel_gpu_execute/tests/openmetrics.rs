//! `--status=openmetrics`, read back by a real parser: prometheus_client's
//! OpenMetrics parser (strict: `# EOF`, HELP and TYPE, escaped label
//! values) and its Prometheus text parser, the format node_exporter's
//! textfile collector reads.
//!
//! The parser is python3 with prometheus_client: `$PROMETHEUS_CLIENT_PYTHON`,
//! else the virtual environment `tools/prometheus_client_venv.sh` makes,
//! else the `python3` first on `PATH` (pyenv's, a virtual environment's, the
//! system's) when it imports it; the test runs that interpreter by the
//! absolute path it reports (`sys.executable`). Under `CI=true`,
//! or with `$PROMETHEUS_CLIENT_PYTHON` set, a missing parser fails the test;
//! elsewhere it says it is skipped.

mod common;

use common::Fixture;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;
use test_support::{Cmd, hold_lock, python_with};

const VERSION: &str = "0.21.1";

const MODULES: &[&str] = &["prometheus_client.openmetrics.parser", "prometheus_client.parser"];

/// python3 with prometheus_client, as the absolute path of the interpreter
/// (a `python3` on `PATH` may be a pyenv shim or a virtual environment's,
/// and the parser runs under a scrubbed `PATH`), or what is missing.
fn parser() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("PROMETHEUS_CLIENT_PYTHON") {
        let p = p.to_string_lossy().into_owned();
        return python_with(&p, MODULES).ok_or_else(|| format!("{p} able to import prometheus_client"));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    let venv = cache.map(|c| c.join(format!("gpu_ci_wrappers/prometheus_client-{VERSION}/bin/python")));
    let venv = venv.map(|v| v.to_string_lossy().into_owned());
    venv.into_iter()
        .chain(["python3".to_string()])
        .find_map(|candidate| python_with(&candidate, MODULES))
        .ok_or_else(|| "python3 with prometheus_client (tools/prometheus_client_venv.sh makes one)".to_string())
}

/// Parses `text` with both parsers and prints each sample as
/// `name<TAB>labels as sorted JSON<TAB>value`, after the families' types.
const SCRIPT: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families as prometheus
text = sys.stdin.read()
om = list(openmetrics(text))
prom = list(prometheus(text))
assert [f.name for f in om] == [f.name for f in prom], ([f.name for f in om], [f.name for f in prom])
for f in om:
    print("family\t%s\t%s\t%s" % (f.name, f.type, f.documentation))
    for s in f.samples:
        print("sample\t%s\t%s\t%s" % (s.name, json.dumps(s.labels, sort_keys=True), s.value))
"#;

#[test]
fn openmetrics_output_parses_and_says_what_status_says() {
    let python = match parser() {
        Ok(p) => p,
        Err(why) => {
            // Named by PROMETHEUS_CLIENT_PYTHON, it is wanted, CI or not.
            let named = std::env::var_os("PROMETHEUS_CLIENT_PYTHON").is_some();
            assert!(!named, "PROMETHEUS_CLIENT_PYTHON is set, and there is no {why}");
            test_support::prerequisite(false, &why, "--status=openmetrics read back by prometheus_client");
            return;
        }
    };
    let mut f = Fixture::new("openmetrics");
    // A lock directory whose name needs escaping in a label value, with a
    // byte that is not UTF-8.
    f.lock_dir = f.dir.join(std::ffi::OsStr::from_bytes(b"lo\"cks\\x\xff"));
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let on = |c: &mut Cmd| {
        c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1");
    };
    let reason = "say \"hi\" \\ back – ü";
    let mut c = f.cmd();
    on(&mut c);
    c.arg("--drain=1").arg(format!("--reason={reason}")).run().assert_success();
    let _held = hold_lock(f.lock("0", 0));
    let mut c = f.cmd();
    on(&mut c);
    let waiter = c.arg("./pkg/gpu_test").spawn();
    assert!(f.queued(1), "the wrapper did not start waiting");
    std::thread::sleep(Duration::from_millis(1100));

    let mut c = f.cmd();
    on(&mut c);
    let out = c.arg("--status=openmetrics").run();
    out.assert_success();
    waiter.signal(libc::SIGTERM);
    let _ = waiter.wait();
    assert!(out.stdout.ends_with("# EOF\n"), "{}", out.explain());

    let mut parse = Cmd::new(&python);
    parse.args(["-c", SCRIPT]).stdin(out.stdout.as_bytes().to_vec());
    let parsed = parse.run();
    parsed.assert_success();
    let mut samples: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut families = Vec::new();
    for line in parsed.stdout.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        match fields[0] {
            "family" => families.push((fields[1].to_string(), fields[2].to_string())),
            _ => {
                samples.insert((fields[1].to_string(), fields[2].to_string()), fields[3].parse().unwrap());
            }
        }
    }
    let report = format!("output:\n{}\nparsed:\n{}", out.stdout, parsed.stdout);
    for (name, kind) in &families {
        assert_eq!(kind, "gauge", "{name}\n{report}");
    }
    let dir = serde_escape(&lossless(f.lock_dir.as_os_str().as_bytes()));
    let get = |name: &str, labels: &str| {
        let key = (name.to_string(), format!("{{{labels}\"lock_dir\": {dir}, \"profile\": \"xla\"}}"));
        *samples.get(&key).unwrap_or_else(|| panic!("no sample {key:?}\n{report}"))
    };
    let slot = |gpu: &str, state: &str| {
        let key = (
            "parallel_gpu_execute_slots".to_string(),
            format!("{{\"gpu\": \"{gpu}\", \"lock_dir\": {dir}, \"profile\": \"xla\", \"state\": \"{state}\"}}"),
        );
        *samples.get(&key).unwrap_or_else(|| panic!("no sample {key:?}\n{report}"))
    };
    assert_eq!((slot("0", "held"), slot("0", "free"), slot("1", "held"), slot("1", "free")), (1.0, 0.0, 0.0, 1.0));
    assert_eq!(get("parallel_gpu_execute_waiters", ""), 1.0, "{report}");
    assert!(get("parallel_gpu_execute_oldest_wait_seconds", "") >= 1.0, "{report}");
    let drained = |gpu: &str, why: &str| {
        let key = (
            "parallel_gpu_execute_gpu_drained".to_string(),
            format!(
                "{{\"gpu\": \"{gpu}\", \"lock_dir\": {dir}, \"profile\": \"xla\", \"reason\": {}}}",
                serde_escape(&lossless(why.as_bytes()))
            ),
        );
        *samples.get(&key).unwrap_or_else(|| panic!("no sample {key:?}\n{report}"))
    };
    assert_eq!((drained("0", ""), drained("1", reason)), (0.0, 1.0), "{report}");
    let healthy = |gpu: &str| {
        let key = (
            "parallel_gpu_execute_gpu_unhealthy".to_string(),
            format!("{{\"gpu\": \"{gpu}\", \"health\": \"ok\", \"lock_dir\": {dir}, \"profile\": \"xla\"}}"),
        );
        *samples.get(&key).unwrap_or_else(|| panic!("no sample {key:?}\n{report}"))
    };
    assert_eq!((healthy("0"), healthy("1")), (0.0, 0.0), "{report}");
}

/// What a label value of `bytes` reads back as (docs/operations.md,
/// "Metrics"): a backslash doubled, a byte that is not UTF-8 as `\xHH`.
fn lossless(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(&chunk.valid().replace('\\', "\\\\"));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// `text` as Python's `json.dumps` writes a string (ASCII only).
fn serde_escape(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// The metrics of `--status=openmetrics` from a PID namespace of its own
/// (a metrics job in a container), nobody waiting there: a slot held from
/// outside cannot be told from a free one, so no slot is counted free;
/// each not seen held is `unknown`. A build without the change counted
/// the held slot free, and said nothing.
#[test]
fn metrics_from_a_pid_namespace_count_no_slot_free() {
    let pid_namespace = test_support::is_root() && std::path::Path::new("/usr/bin/unshare").exists();
    if !test_support::prerequisite(pid_namespace, "root and unshare(1)", "metrics from a PID namespace") {
        return;
    }
    let f = Fixture::new("metrics-pidns");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let _held = hold_lock(f.lock("0", 0));
    test_support::write_file(f.lock("1", 0), "");
    let mut c = f.cmd_under("/usr/bin/unshare", ["--pid", "--fork", "--mount-proc", "--mount"]);
    c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1").arg("--status=openmetrics");
    let out = c.run();
    if out.code() != 0 && out.stderr.contains("unshare") {
        let why = format!("PID namespace (unshare failed: {})", out.stderr.trim());
        test_support::prerequisite(false, &why, "metrics from a PID namespace");
        return;
    }
    out.assert_success();
    let dir = f.lock_dir.display();
    for gpu in ["0", "1"] {
        for (state, n) in [("held", 0), ("free", 0), ("unknown", 1)] {
            out.assert_stdout_contains(&format!(
                "parallel_gpu_execute_slots{{lock_dir=\"{dir}\",profile=\"xla\",gpu=\"{gpu}\",state=\"{state}\"}} {n}\n"
            ));
        }
    }
    // A slot without a lock file is free wherever it is looked at from.
    let mut c = f.cmd_under("/usr/bin/unshare", ["--pid", "--fork", "--mount-proc", "--mount"]);
    let out = c.env("TF_GPU_COUNT", "3").env("TF_TESTS_PER_GPU", "1").arg("--status=openmetrics").run();
    out.assert_success().assert_stdout_contains(&format!(
        "parallel_gpu_execute_slots{{lock_dir=\"{dir}\",profile=\"xla\",gpu=\"2\",state=\"free\"}} 1\n"
    ));
    // On the host the same slots are told: GPU 0's held, GPU 1's free.
    let mut c = f.cmd();
    let out = c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1").arg("--status=openmetrics").run();
    out.assert_success();
    for (gpu, state) in [("0", "held"), ("1", "free")] {
        out.assert_stdout_contains(&format!(
            "parallel_gpu_execute_slots{{lock_dir=\"{dir}\",profile=\"xla\",gpu=\"{gpu}\",state=\"{state}\"}} 1\n"
        ));
    }
    assert!(!out.stdout.contains("state=\"unknown\""), "{}", out.explain());
    // On the host with a /proc that hides other users' processes (pid 2
    // too) from `nobody`: the host's namespace all the same, free is free.
    let script = format!(
        "mount -t proc -o hidepid=2 proc /proc || exit 99\n\
         exec setpriv --reuid=65534 --regid=65534 --clear-groups {} --status=openmetrics",
        common::bin()
    );
    let mut c = Cmd::new("/usr/bin/unshare");
    c.args(["--mount", "sh", "-c", &script]).env("PARALLEL_GPU_EXECUTE_LOCK_DIR", &f.lock_dir);
    let out = c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1").run();
    out.assert_success();
    out.assert_stdout_contains(&format!(
        "parallel_gpu_execute_slots{{lock_dir=\"{dir}\",profile=\"xla\",gpu=\"1\",state=\"free\"}} 1\n"
    ));
    assert!(!out.stdout.contains("state=\"unknown\""), "{}", out.explain());
    // A PID namespace whose pid 2 was entered from outside (its parent
    // shown as 0, as `docker exec` makes it): no host for all that.
    let container = common::EnteredNamespace::new();
    let mut c = f.cmd_under("nsenter", container.enter());
    let out = c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "1").arg("--status=openmetrics").run();
    drop(container);
    out.assert_success().assert_stdout_contains(&format!(
        "parallel_gpu_execute_slots{{lock_dir=\"{dir}\",profile=\"xla\",gpu=\"0\",state=\"unknown\"}} 1\n"
    ));
}

/// More slots than are listed (8 GPUs x 1,024 slots, both within their
/// limits): those without a lock file are counted free, per GPU, in every
/// format. A build without the count listed none of them: one slot, no
/// series for GPUs 1-7, and 0 free where 8,191 were, an "all busy" alert.
#[test]
fn slots_beyond_those_listed_are_counted_free() {
    let f = Fixture::new("metrics-many-slots");
    let run = |format: &str| {
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", "8").env("TF_TESTS_PER_GPU", "1024").arg(format!("--status={format}"));
        c.run()
    };
    // No lock directory yet: every slot free.
    let text = run("text");
    assert!(text.assert_success().stdout.contains(": 8192 slot(s), 0 held"), "{}", text.explain());
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held = hold_lock(f.lock("3", 5));
    // A FIFO at a lock path, which every test skips: skipped, not free.
    let fifo = std::ffi::CString::new(f.lock("6", 9).as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    // One that spells a slot with a leading zero is no slot of GPU 6 (it
    // was counted a second skipped one).
    let zero = std::ffi::CString::new(f.lock_dir.join("gpulock6_09").as_os_str().as_bytes()).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::mkfifo(zero.as_ptr(), 0o644) }, 0);
    let (text, metrics, json) = (run("text"), run("openmetrics"), run("json"));
    drop(held);
    assert!(text.assert_success().stdout.contains(": 8192 slot(s), 1 held"), "{}", text.explain());
    assert!(text.stdout.contains("note: 8190 more slots of these settings, free"), "{}", text.explain());
    let value = |gpu: &str, state: &str| {
        let key = format!("gpu=\"{gpu}\",state=\"{state}\"}} ");
        metrics.stdout.lines().find_map(|l| l.split_once(&key).map(|(_, v)| v.to_string()))
    };
    metrics.assert_success();
    assert_eq!(
        (value("3", "held"), value("3", "free")),
        (Some("1".into()), Some("1023".into())),
        "{}",
        metrics.explain()
    );
    assert_eq!(
        (value("7", "held"), value("7", "free")),
        (Some("0".into()), Some("1024".into())),
        "{}",
        metrics.explain()
    );
    let fifo_gpu = (value("6", "skipped"), value("6", "free"));
    assert_eq!(fifo_gpu, (Some("1".into()), Some("1023".into())), "{}", metrics.explain());
    assert!(text.stdout.contains("skipped (a FIFO"), "{}", text.explain());
    assert!(json.assert_success().stdout.contains("\"unlisted_free_slots\": 8190"), "{}", json.explain());
}

/// Tests given more slots per GPU than the report (`--list=bazelrc`'s
/// `TF_TESTS_PER_GPU=16`, a cron job with the default 8): a GPU whose held
/// lock files are all at slots 8-11 is in use, and the metrics say so
/// (`held_beyond_settings`) where they said 0 held, 8 free; a GPU of
/// another profile's, or not of these settings, adds nothing.
#[test]
fn held_lock_files_beyond_the_reports_slots_are_counted() {
    let f = Fixture::new("metrics-beyond-settings");
    std::fs::create_dir_all(&f.lock_dir).unwrap();
    let held: Vec<_> = (8..12).map(|slot| hold_lock(f.lock("0", slot))).collect();
    let _other_profile = hold_lock(f.lock_dir.join("jax_accelerator_lock_1_9"));
    let _other_gpu = hold_lock(f.lock("5", 9));
    let run = || {
        let mut c = f.cmd();
        c.env("TF_GPU_COUNT", "2").env("TF_TESTS_PER_GPU", "8").arg("--status=openmetrics");
        c.run()
    };
    let metrics = run();
    let value = |out: &test_support::Output, gpu: &str, state: &str| {
        let key = format!("gpu=\"{gpu}\",state=\"{state}\"}} ");
        out.stdout.lines().find_map(|l| l.split_once(&key).map(|(_, v)| v.to_string()))
    };
    metrics.assert_success();
    let gpu0 = ["held", "free", "held_beyond_settings"].map(|s| value(&metrics, "0", s));
    assert_eq!(gpu0, [Some("0".into()), Some("8".into()), Some("4".into())], "{}", metrics.explain());
    assert_eq!(value(&metrics, "1", "held_beyond_settings"), None, "{}", metrics.explain());
    assert_eq!(value(&metrics, "5", "held_beyond_settings"), None, "{}", metrics.explain());
    // Let go: the state is no longer there.
    drop(held);
    let metrics = run();
    assert_eq!(value(&metrics, "0", "held_beyond_settings"), None, "{}", metrics.explain());
}

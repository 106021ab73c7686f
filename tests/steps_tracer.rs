//! The benchmark's counter, `benches/support/steps.c`, counts what it says:
//! instructions, CPUID instructions and system calls up to a process's exec
//! of its next program (or its exit), and the whole run's exit status.
//!
//! Checked on programs whose counts are known by construction (built here
//! with `-nostdlib`: no C library start-up, so every instruction is the
//! test's own), on the glibc floor against strace's count of the same run
//! (where strace is installed, as CI installs it), and on the ways it must
//! refuse. x86-64 only, as the counter and the benchmark are.
#![cfg(target_arch = "x86_64")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use test_support::{TempDir, compile_c, write_file};

struct Built {
    dir: TempDir,
    steps: PathBuf,
    /// `int main(){return 0;}`, static glibc.
    glibc_true: PathBuf,
    /// `benches/floor/exec.c`: static glibc, execv(argv[1]).
    glibc_floor: PathBuf,
    /// No C library: three CPUIDs, then exit_group(3).
    three_cpuids: PathBuf,
    /// No C library: two getpid, then execve of `glibc_true`.
    two_then_exec: PathBuf,
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = TempDir::new("steps-tracer");
        let static_c = ["-static", "-O2"];
        let steps = dir.join("steps");
        compile_c(&static_c, root.join("benches/support/steps.c"), &steps);
        let glibc_true = dir.join("true");
        compile_c(&static_c, root.join("benches/floor/true.c"), &glibc_true);
        let glibc_floor = dir.join("exec");
        compile_c(&static_c, root.join("benches/floor/exec.c"), &glibc_floor);

        let bare = ["-static", "-nostdlib", "-O1", "-fno-stack-protector"];
        let cpuid_c = dir.join("three_cpuids.c");
        write_file(
            &cpuid_c,
            r#"
            static void cpuid(unsigned leaf) {
                unsigned a = leaf, b, c = 0, d;
                __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
            }
            void _start(void) {
                cpuid(0);
                cpuid(1);
                cpuid(7);
                __asm__ volatile("mov $231, %eax\n\tmov $3, %edi\n\tsyscall");
                __builtin_unreachable();
            }
            "#,
        );
        let three_cpuids = dir.join("three_cpuids");
        compile_c(&bare, &cpuid_c, &three_cpuids);

        let exec_c = dir.join("two_then_exec.c");
        write_file(
            &exec_c,
            format!(
                r#"
                static long call3(long n, long a, long b, long c) {{
                    long r;
                    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
                    return r;
                }}
                static const char path[] = "{}";
                void _start(void) {{
                    const char *argv[] = {{path, 0}};
                    const char *envp[] = {{0}};
                    call3(39, 0, 0, 0);
                    call3(39, 0, 0, 0);
                    call3(59, (long)path, (long)argv, (long)envp);
                    call3(231, 126, 0, 0);
                    __builtin_unreachable();
                }}
                "#,
                glibc_true.display()
            ),
        );
        let two_then_exec = dir.join("two_then_exec");
        compile_c(&bare, &exec_c, &two_then_exec);
        Built { dir, steps, glibc_true, glibc_floor, three_cpuids, two_then_exec }
    })
}

fn explain(cmd: &[&Path], out: &Output) -> String {
    format!(
        "command: {cmd:?}\nstatus: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs the tracer on `program args`; its line, split.
fn trace(program: &Path, args: &[&Path]) -> (u64, u64, u64, String, i32) {
    let steps = &built().steps;
    let mut cmd: Vec<&Path> = vec![program];
    cmd.extend(args);
    let out = Command::new(steps).args(&cmd).output().expect("run the tracer");
    assert!(out.status.success(), "the tracer failed:\n{}", explain(&cmd, &out));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let f: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(f.len(), 5, "not five fields:\n{}", explain(&cmd, &out));
    let n =
        |i: usize| f[i].parse::<u64>().unwrap_or_else(|_| panic!("field {i} is no number:\n{}", explain(&cmd, &out)));
    (n(0), n(1), n(2), f[3].to_string(), f[4].parse().unwrap())
}

#[test]
fn counts_cpuid_and_system_calls_of_a_program_without_a_c_library() {
    let (steps, cpuid, syscalls, end, status) = trace(&built().three_cpuids, &[]);
    assert_eq!((cpuid, syscalls, end.as_str(), status), (3, 1, "exit", 3), "steps {steps}");
    // Three CPUIDs with their register set-up and the exit: a few dozen
    // instructions at most, and at least the four counted ones.
    assert!((4..100).contains(&steps), "{steps} steps");
}

#[test]
fn stops_counting_at_the_exec_and_reports_the_programs_status() {
    let (steps, cpuid, syscalls, end, status) = trace(&built().two_then_exec, &[]);
    // getpid, getpid, execve: the counts stop there; the exec'd glibc
    // program (which runs CPUID in its start-up) is not counted, and its
    // exit status 0 is the run's.
    assert_eq!((cpuid, syscalls, end.as_str(), status), (0, 3, "exec", 0), "steps {steps}");
    assert!((3..100).contains(&steps), "{steps} steps");
}

#[test]
fn the_glibc_floor_counts_as_strace_sees_it() {
    let b = built();
    let (floor_steps, floor_cpuid, floor_calls, end, status) = trace(&b.glibc_floor, &[&b.glibc_true]);
    assert_eq!((end.as_str(), status), ("exec", 0));
    let (true_steps, true_cpuid, _, true_end, _) = trace(&b.glibc_true, &[]);
    assert_eq!(true_end, "exit");
    // The same static glibc start-up probes the CPU the same way in both.
    assert_eq!(floor_cpuid, true_cpuid, "the floor and the test run glibc's start-up alike");
    assert!(floor_steps > 1000 && true_steps > 1000, "{floor_steps} and {true_steps} steps for glibc's start-up");

    let have_strace = Command::new("strace").arg("-V").output().is_ok_and(|o| o.status.success());
    if !test_support::prerequisite(have_strace, "strace", "the cross-check of the traced system calls with strace") {
        return;
    }
    let log = b.dir.join("floor.strace");
    let out =
        Command::new("strace").arg("-o").arg(&log).arg(&b.glibc_floor).arg(&b.glibc_true).output().expect("run strace");
    assert!(out.status.success(), "strace failed:\n{}", explain(&[&b.glibc_floor, &b.glibc_true], &out));
    let text = std::fs::read_to_string(&log).unwrap();
    // strace's first line is the execve that starts the floor; count the
    // calls after it up to and including the floor's execve of the test.
    let upto_exec = text
        .lines()
        .skip(1)
        .position(|l| l.starts_with("execve("))
        .unwrap_or_else(|| panic!("no second execve in strace's log:\n{text}"));
    assert_eq!(floor_calls, upto_exec as u64 + 1, "strace's log:\n{text}");
}

#[test]
fn refuses_what_it_cannot_trace_with_one_line() {
    let steps = &built().steps;
    for args in [&[][..], &["/nonexistent/program"][..]] {
        let out = Command::new(steps).args(args).output().expect("run the tracer");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {}", explain(&[], &out));
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {}", explain(&[], &out));
        assert!(stderr.starts_with("steps: "), "{args:?}: {}", explain(&[], &out));
        assert!(out.stdout.is_empty(), "{args:?}: {}", explain(&[], &out));
    }
}

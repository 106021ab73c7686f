//! The wait protocol's model check (`wait_model/`, docs/design.md, "The
//! wait queue"), run as part of `cargo test --workspace`. The model lives
//! in a workspace of its own, so that its model checker's dependencies
//! never share a feature resolution with the wrappers'; this test builds
//! and runs it with the same Cargo, into `target/wait_model`, and prints
//! what it printed (each scenario's size; on a failure, the invariant, the
//! shortest trace that breaks it and the state it ends in).

use std::path::Path;
use std::process::Command;

#[test]
fn the_wait_protocol_keeps_its_invariants_in_every_interleaving() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut c = Command::new(&cargo);
    c.args(["test", "--locked", "--manifest-path"])
        .arg(root.join("wait_model/Cargo.toml"))
        .args(["--", "--nocapture", "--test-threads=2"])
        .env("CARGO_TARGET_DIR", root.join("target/wait_model"))
        .current_dir(root);
    let out = c.output().unwrap_or_else(|e| panic!("{cargo}: {e}"));
    let text = format!(
        "command: {c:?}\nstatus: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "the model check failed\n{text}");
    // Every scenario ran: the protocol's, and the previous one's breaking.
    let stdout = String::from_utf8_lossy(&out.stdout);
    for expected in ["one pool, frozen:", "two slots x4, frozen:", "every fault:", "previous: frozen head: breaks"] {
        assert!(stdout.contains(expected), "no {expected:?} in the output\n{text}");
    }
}

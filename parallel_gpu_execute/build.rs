//! Link order, and identical code folded (`--icf=safe`), for the static
//! glibc build (docs/design.md, "Static linking"). The order: the read-only tables that glibc's static start-up reads
//! (`intel_02_known`, the cache descriptors of `init_cacheinfo`, and
//! `system_dirs_len` of `_dl_init_paths`) are put first in `.rodata`, in the
//! kernel's first fault-around window of the file (64 KB), which start-up
//! touches anyway. Elsewhere they fall where the size of this program's own
//! messages puts them, and a few hundred bytes more of text can move them
//! into a window of their own: one more page fault on every run.
//!
//! Only where the linker is lld (rustc 1.90 and later links this target
//! with it, unless told otherwise): its `--symbol-ordering-file` is not
//! GNU ld's. The bins of this package alone; the path is absolute, so the
//! file is found from any working directory.

use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    if env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu") || !links_with_lld() {
        return;
    }
    let Ok(dir) = env::var("CARGO_MANIFEST_DIR") else { return };
    let order = Path::new(&dir).join("link-order.txt");
    println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}", order.display());
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    // Identical functions folded (docs/design.md, "Static linking"): GNU ld
    // has no --icf, which keeps it here, where the linker is lld.
    println!("cargo:rustc-link-arg-bins=-Wl,--icf=safe");
}

/// Whether rustc links this target with lld: from 1.90, where no other
/// linker is named in the flags or the environment.
fn links_with_lld() -> bool {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("-vV").output() else { return false };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(release) = text.lines().find_map(|l| l.strip_prefix("release: ")) else { return false };
    let mut parts = release.split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let other = flags
        .split('\x1f')
        .any(|f| f.contains("linker=") || f.contains("linker-flavor") || f.contains("linker-features"))
        || env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some();
    (major, minor) >= (1, 90) && !other
}

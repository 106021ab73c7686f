"""Private: the Bazel targets of a crate of this Cargo workspace.

Not for use outside this repository; users load //:defs.bzl.
"""

load("@rules_rust//rust:defs.bzl", "rust_binary", "rust_library", "rust_test")
load(":crates.bzl", "CRATES", "crate_label")

# From [workspace.package] in Cargo.toml; becomes CARGO_PKG_VERSION, which the
# binaries print for --version. Keep the two in step.
CRATE_VERSION = "0.1.0"
EDITION = "2024"

# Every binary is built for this platform, whatever the build is for: a static
# musl executable runs on any Linux host, and Bazel 9 builds a --run_under
# target for the exec platform, so only the target itself can insist on it.
STATIC_PLATFORM = Label("//bazel:linux_x86_64_musl")

# Static whatever rustc's default for the target: a future default cannot
# make the wrappers dynamic. And `panic=abort` in every compilation mode, as
# Cargo's profiles have it: parallel_gpu_execute is `no_std` and has no
# unwinder (its libraries, built with rules_rust's default, may unwind: a
# binary that aborts can link them).
STATIC_RUSTC_FLAGS = ["-Ctarget-feature=+crt-static", "-Cpanic=abort"]

def workspace_crate(name, deps = [], crates = [], dev_deps = [], testonly = False, visibility = None):
    """Declares what Cargo builds from the crate in this package.

    Like Cargo, it looks at the sources: `src/lib.rs` makes a rust_library
    (`<name>`, or `<name>_lib` when there is a binary too), `src/main.rs` a
    static rust_binary `<name>`. `<name>_test` runs the unit tests: those of the
    library when there is one (the binaries of lib + bin crates have a C `main`
    and no tests of their own), else those of the binary.

    External dependencies are the crates.io crates of //bazel:crates.bzl,
    named in `crates` as in Cargo.toml's `[dependencies]` (`cargo test
    --test bazel_crates` checks that they agree); dependencies on other
    crates of this workspace are listed in `deps` and `dev_deps`.

    Args:
        name: The crate (package) name.
        deps: Workspace crates it depends on, e.g. "//wrapper_common".
        crates: crates.io crates it depends on, e.g. ["libc", "rustix"].
        dev_deps: Workspace crates its tests depend on.
        testonly: For crates only tests may use.
        visibility: Visibility of the binary, or of the library when there is
            no binary (the library of a lib + bin crate stays private).
    """
    has_lib = len(native.glob(["src/lib.rs"], allow_empty = True)) > 0
    has_bin = len(native.glob(["src/main.rs"], allow_empty = True)) > 0
    if not has_lib and not has_bin:
        fail("{}: neither src/lib.rs nor src/main.rs".format(name))

    common = dict(
        edition = EDITION,
        testonly = testonly,
        version = CRATE_VERSION,
    )
    for crate in crates:
        if crate not in CRATES:
            fail("{}: crate {} is not in //bazel:crates.bzl".format(name, crate))
    normal_deps = deps + [crate_label(c) for c in crates]
    test_deps = dev_deps

    lib = None
    if has_lib:
        lib = name + "_lib" if has_bin else name
        rust_library(
            name = lib,
            crate_name = name,
            crate_root = "src/lib.rs",
            srcs = native.glob(["src/**/*.rs"], exclude = ["src/main.rs"]),
            deps = normal_deps,
            visibility = None if has_bin else visibility,
            **common
        )

    if has_bin:
        rust_binary(
            name = name,
            crate_root = "src/main.rs",
            srcs = native.glob(["src/**/*.rs"], exclude = ["src/lib.rs"]),
            deps = normal_deps + ([":" + lib] if lib else []),
            platform = STATIC_PLATFORM,
            rustc_flags = STATIC_RUSTC_FLAGS,
            visibility = visibility,
            **common
        )

    if lib:
        rust_test(
            name = name + "_test",
            crate = ":" + lib,
            deps = test_deps,
        )
    else:
        # The binary's dependencies are built for STATIC_PLATFORM, so its
        # tests must be too.
        rust_test(
            name = name + "_test",
            crate = ":" + name,
            deps = test_deps,
            platform = STATIC_PLATFORM,
        )

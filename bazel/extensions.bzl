"""Module extensions for bzlmod users of gpu_ci_wrappers.

Prebuilt wrappers (no Rust toolchain):

    wrappers = use_extension("@gpu_ci_wrappers//bazel:extensions.bzl", "wrappers")
    wrappers.prebuilt(
        name = "gpu_ci_wrappers_bin",
        base_url = "https://<host>/<org>/gpu_ci_wrappers/releases/download/v0.1.0",
        version = "0.1.0",
        target = "x86_64-unknown-linux-musl",
        sha256s = {"parallel_gpu_execute": "...", "sanitizer_wrapper": "...", "tag_filters": "..."},
    )
    use_repo(wrappers, "gpu_ci_wrappers_bin")

The `crates` extension (used by this module itself, for the from-source
build) creates the repositories of the wrappers' crate dependencies from
crates.io, pinned to Cargo.lock's versions and checksums: it resolves nothing
at build time, so it works in every module that depends on this one.
"""

load(":binaries.bzl", "gpu_ci_wrappers_binaries")
load(":crates.bzl", "crate_repositories")

_prebuilt = tag_class(
    attrs = {
        "base_url": attr.string(mandatory = True),
        "name": attr.string(mandatory = True),
        "sha256s": attr.string_dict(mandatory = True),
        "target": attr.string(default = "x86_64-unknown-linux-musl"),
        "version": attr.string(mandatory = True),
    },
    doc = "A repository of the prebuilt wrappers of one release (see //bazel:binaries.bzl).",
)

def _wrappers_impl(mctx):
    for module in mctx.modules:
        for tag in module.tags.prebuilt:
            gpu_ci_wrappers_binaries(
                name = tag.name,
                base_url = tag.base_url,
                sha256s = tag.sha256s,
                target = tag.target,
                version = tag.version,
            )

wrappers = module_extension(
    implementation = _wrappers_impl,
    tag_classes = {"prebuilt": _prebuilt},
    doc = "Prebuilt gpu_ci_wrappers binaries, downloaded and checked against their sha256.",
)

def _crates_impl(_mctx):
    crate_repositories()

crates = module_extension(
    implementation = _crates_impl,
    doc = "The crates.io dependencies of the wrappers, pinned to Cargo.lock.",
)

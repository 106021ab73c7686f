"""Macros that turn the GPU-CI wrappers into `bazel test --run_under` targets.

    load("@gpu_ci_wrappers//:defs.bzl", "parallel_accelerator_execute", "parallel_gpu_execute", "sanitizer_wrapper", "tag_filters")

Bazel ignores the `args` and `env` attributes of a `--run_under` target, but it
merges the target's runfiles into the test's. Everything a wrapper needs
therefore travels as runfiles:

* `parallel_gpu_execute` puts `data` (for example a `rocminfo` whose runfiles
  path ends in `/bin/rocminfo`) next to the wrapper.
* `sanitizer_wrapper` writes its options to `<name>.sanitizer_wrapper.conf`
  beside the `<name>` executable; the binary reads `<argv[0]>.sanitizer_wrapper.conf`.
* `parallel_accelerator_execute` is parallel_gpu_execute in its `jax` profile:
  its executable is `<name>/parallel_accelerator_execute`, and that base name
  selects the profile (JAX's lock names, variables and messages).
* `tag_filters` writes the project's tag table (or the name of a compiled-in
  preset) to `<name>.tag_filters.conf` beside the `<name>` executable; the
  binary reads `<argv[0]>.tag_filters.conf`, so
  `bazel run //pkg:<name> -- --config=ci_single_gpu` prints that table's filter.

Each wrapper target is a symlink named `<name>` to the static binary, so
`argv[0]` is `<runfiles>/<workspace>/<package>/<name>`.

Every `binary` is built in a configuration of its own (`_wrapper_transition`):
`compilation_mode=opt`, no `copt`, `conlyopt`, `cxxopt`, `linkopt` or
`features`, and no coverage instrumentation. A `--run_under` target is built in
the test's configuration, so without it `bazel test --config=asan` (with
`-fsanitize=address` link options), `-c dbg`, or `bazel coverage` with an
`--instrumentation_filter` that matches the wrapper would reach the wrapper's
own build; a prebuilt binary is not affected either way.

This file loads nothing on purpose: it works with every Bazel from 4.2 on, in
WORKSPACE and Bzlmod projects alike, without rules_rust in the caller's
repository. The default `binary` labels need rules_rust (they are built from
source by this module); pass `binary` to use a prebuilt executable instead.
"""

_CONF_SUFFIX = ".sanitizer_wrapper.conf"

def _wrapper_transition_impl(_settings, _attr):
    return {
        "//command_line_option:collect_code_coverage": False,
        "//command_line_option:compilation_mode": "opt",
        "//command_line_option:conlyopt": [],
        "//command_line_option:copt": [],
        "//command_line_option:cxxopt": [],
        "//command_line_option:features": [],
        "//command_line_option:linkopt": [],
    }

_wrapper_transition = transition(
    implementation = _wrapper_transition_impl,
    inputs = [],
    outputs = [
        "//command_line_option:collect_code_coverage",
        "//command_line_option:compilation_mode",
        "//command_line_option:conlyopt",
        "//command_line_option:copt",
        "//command_line_option:cxxopt",
        "//command_line_option:features",
        "//command_line_option:linkopt",
    ],
)

# Bazel before 7 asks every rule with a Starlark transition for this attribute.
_TRANSITION_ALLOWLIST = attr.label(
    default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
)

def _binary_attr(default, doc):
    return attr.label(
        default = default,
        executable = True,
        cfg = _wrapper_transition,
        doc = doc,
    )

def _binary(ctx):
    """The `binary` target and its executable (an attribute with a transition is a list)."""
    target = ctx.attr.binary
    if type(target) == "list":
        target = target[0]
    return target, target[DefaultInfo].files_to_run.executable

def _rlocation_path(ctx, file):
    """The path of `file` as the runfiles library's `rlocation` expects it."""
    if file.short_path.startswith("../"):
        # External repository: "../<repo>/<path>" -> "<repo>/<path>".
        return file.short_path[len("../"):]
    return ctx.workspace_name + "/" + file.short_path

def _merge_runfiles(ctx, files, targets):
    """Runfiles of `files` plus the files and default runfiles of `targets`."""
    runfiles = ctx.runfiles(files = files)
    for target in targets:
        info = target[DefaultInfo]
        runfiles = runfiles.merge(ctx.runfiles(transitive_files = info.files))
        if info.default_runfiles:
            runfiles = runfiles.merge(info.default_runfiles)
    return runfiles

def _link_binary(ctx, path = None):
    """Declares the `<name>` executable (or `path`): a symlink to the wrapper binary."""
    executable = ctx.actions.declare_file(path or ctx.label.name)
    ctx.actions.symlink(
        output = executable,
        target_file = _binary(ctx)[1],
        is_executable = True,
    )
    return executable

# The attributes of both parallel_gpu_execute rules (xla and jax profile).
_PGE_ATTRS = {
    "binary": _binary_attr(Label("//:parallel_gpu_execute"), "The parallel_gpu_execute executable."),
    "data": attr.label_list(
        allow_files = True,
        doc = "Files the wrapper finds through the runfiles, e.g. rocminfo.",
    ),
    "_allowlist_function_transition": _TRANSITION_ALLOWLIST,
}

def _pge_info(ctx, executable):
    """DefaultInfo of a parallel_gpu_execute target: the executable, the binary and `data` as runfiles."""
    binary, binary_file = _binary(ctx)
    return [DefaultInfo(
        executable = executable,
        files = depset([executable]),
        runfiles = _merge_runfiles(ctx, [executable, binary_file], [binary] + ctx.attr.data),
    )]

def _parallel_gpu_execute_impl(ctx):
    return _pge_info(ctx, _link_binary(ctx))

_parallel_gpu_execute = rule(
    implementation = _parallel_gpu_execute_impl,
    executable = True,
    attrs = _PGE_ATTRS,
    doc = "A `--run_under` target running parallel_gpu_execute with `data` in its runfiles.",
)

def _parallel_accelerator_execute_impl(ctx):
    # The base name selects the jax profile, whatever the target is called.
    return _pge_info(ctx, _link_binary(ctx, ctx.label.name + "/parallel_accelerator_execute"))

_parallel_accelerator_execute = rule(
    implementation = _parallel_accelerator_execute_impl,
    executable = True,
    attrs = _PGE_ATTRS,
    doc = "A `--run_under` target running parallel_gpu_execute in its jax profile.",
)

def parallel_accelerator_execute(name, data = [], binary = None, **kwargs):
    """A `--run_under` target that drops in for JAX's parallel_accelerator_execute.sh.

    Counts TPU chips and GPUs itself (`JAX_ACCELERATOR_COUNT` still wins when
    set), locks `jax_accelerator_lock_<id>_<slot>` and sets
    `TPU_VISIBLE_CHIPS`, `CUDA_VISIBLE_DEVICES` and `ROCR_VISIBLE_DEVICES`.

    Args:
        name: Name of the wrapper target; use it as `--run_under=//pkg:<name>`.
        data: Files and targets to put into the wrapper's runfiles.
        binary: The parallel_gpu_execute executable; defaults to the static
            build of this module. Pass a prebuilt one to avoid rules_rust.
        **kwargs: Common attributes (tags, visibility, testonly, ...).
    """
    _parallel_accelerator_execute(
        name = name,
        binary = binary,
        data = data,
        **kwargs
    )

def parallel_gpu_execute(name, data = [], binary = None, **kwargs):
    """A `--run_under` target that gives each GPU test its own GPU slot.

    Args:
        name: Name of the wrapper target; use it as `--run_under=//pkg:<name>`.
        data: Files and targets to put into the wrapper's runfiles, e.g.
            `@local_config_rocm//rocm:rocminfo`, whose runfiles path ends in
            `/bin/rocminfo`, so the wrapper can count GPUs with it.
        binary: The parallel_gpu_execute executable; defaults to the static
            build of this module. Pass a prebuilt one to avoid rules_rust.
        **kwargs: Common attributes (tags, visibility, testonly, ...).
    """
    _parallel_gpu_execute(
        name = name,
        binary = binary,
        data = data,
        **kwargs
    )

def _check_line(owner, what, value):
    if "\n" in value or "\r" in value:
        fail("{}: {} must fit on one line of the sanitizer_wrapper config, got {}".format(
            owner,
            what,
            repr(value),
        ))
    return value

def _symbolizer_file(ctx):
    """The llvm-symbolizer executable among what `llvm_symbolizer` provides."""
    target = ctx.attr.llvm_symbolizer
    files_to_run = target[DefaultInfo].files_to_run
    if files_to_run and files_to_run.executable:
        return files_to_run.executable
    files = target[DefaultInfo].files.to_list()
    named = [f for f in files if f.basename == "llvm-symbolizer"]
    if len(named) == 1:
        return named[0]
    if len(files) == 1:
        return files[0]
    fail("{}: llvm_symbolizer {} must be an executable, a single file or hold exactly one file named llvm-symbolizer".format(
        ctx.label,
        target.label,
    ))

def _sanitizer_wrapper_impl(ctx):
    executable = _link_binary(ctx)
    binary, binary_file = _binary(ctx)
    owner = str(ctx.label)

    lines = ["# sanitizer_wrapper options for {}, one per line.".format(owner)]
    files = [executable, binary_file]
    targets = [binary] + ctx.attr.additional_data

    for option, value in [
        ("asan-options", ctx.attr.asan_options),
        ("lsan-options", ctx.attr.lsan_options),
        ("tsan-options", ctx.attr.tsan_options),
    ]:
        if value:
            lines.append("--{}={}".format(option, _check_line(owner, option, value)))

    for option, attr_name in [
        ("asan-suppressions", "asan_ignore_list"),
        ("lsan-suppressions", "lsan_ignore_list"),
        ("tsan-suppressions", "tsan_ignore_list"),
    ]:
        ignore_list = getattr(ctx.file, attr_name)
        if ignore_list:
            files.append(ignore_list)
            path = _rlocation_path(ctx, ignore_list)
            lines.append("--{}={}".format(option, _check_line(owner, attr_name, path)))

    if ctx.attr.llvm_symbolizer:
        symbolizer = _symbolizer_file(ctx)
        files.append(symbolizer)
        targets.append(ctx.attr.llvm_symbolizer)
        path = _rlocation_path(ctx, symbolizer)
        lines.append("--symbolizer=" + _check_line(owner, "llvm_symbolizer", path))

    if ctx.attr.run_under:
        files.append(ctx.executable.run_under)
        targets.append(ctx.attr.run_under)
        path = _rlocation_path(ctx, ctx.executable.run_under)
        lines.append("--run-under=" + _check_line(owner, "run_under", path))

    config = ctx.actions.declare_file(ctx.label.name + _CONF_SUFFIX)
    ctx.actions.write(output = config, content = "\n".join(lines) + "\n")
    files.append(config)

    return [DefaultInfo(
        executable = executable,
        files = depset([executable, config]),
        runfiles = _merge_runfiles(ctx, files, targets),
    )]

_sanitizer_wrapper = rule(
    implementation = _sanitizer_wrapper_impl,
    executable = True,
    attrs = {
        "additional_data": attr.label_list(
            allow_files = True,
            doc = "More files and targets for the runfiles.",
        ),
        "asan_ignore_list": attr.label(
            allow_single_file = True,
            doc = "Added to ASAN_OPTIONS as suppressions=<absolute path>.",
        ),
        "asan_options": attr.string(doc = "Base ASAN_OPTIONS."),
        "binary": _binary_attr(Label("//:sanitizer_wrapper"), "The sanitizer_wrapper executable."),
        "llvm_symbolizer": attr.label(
            allow_files = True,
            cfg = "target",
            doc = "llvm-symbolizer, added as external_symbolizer_path to ASAN_OPTIONS and TSAN_OPTIONS.",
        ),
        "lsan_ignore_list": attr.label(
            allow_single_file = True,
            doc = "Added to LSAN_OPTIONS as suppressions=<absolute path>.",
        ),
        "lsan_options": attr.string(doc = "Base LSAN_OPTIONS."),
        "run_under": attr.label(
            executable = True,
            cfg = "target",
            doc = "A further wrapper, e.g. a parallel_gpu_execute target, run with the test and its arguments.",
        ),
        "tsan_ignore_list": attr.label(
            allow_single_file = True,
            doc = "Added to TSAN_OPTIONS as suppressions=<absolute path>.",
        ),
        "tsan_options": attr.string(doc = "Base TSAN_OPTIONS."),
        "_allowlist_function_transition": _TRANSITION_ALLOWLIST,
    },
    doc = "A `--run_under` target running sanitizer_wrapper configured through its runfiles.",
)

def sanitizer_wrapper(
        name,
        llvm_symbolizer,
        asan_options,
        tsan_options,
        asan_ignore_list = None,
        lsan_ignore_list = None,
        tsan_ignore_list = None,
        run_under = None,
        additional_data = [],
        tags = ["manual"],
        visibility = None,
        lsan_options = "",
        binary = None,
        **kwargs):
    """A `--run_under` target that sets up ASan, LSan and TSan for a test.

    Takes the same arguments as the shell-template `sanitizer_wrapper` macro;
    switching is the `load` line plus a prebuilt `binary` (without one, the
    wrapper is built from source, with rules_rust).

    Args:
        name: Name of the wrapper target; use it as `--run_under=//pkg:<name>`.
        llvm_symbolizer: llvm-symbolizer: an executable target, a file, or a
            target holding exactly one file named `llvm-symbolizer`; may be None.
        asan_options: Base ASAN_OPTIONS, e.g. "detect_leaks=1:halt_on_error=1".
        tsan_options: Base TSAN_OPTIONS.
        asan_ignore_list: Optional ASan suppressions file.
        lsan_ignore_list: Optional LSan suppressions file.
        tsan_ignore_list: Optional TSan suppressions file.
        run_under: Optional further wrapper, e.g. a `parallel_gpu_execute` target.
        additional_data: More runfiles for the wrapper.
        tags: Tags of the wrapper target.
        visibility: Visibility of the wrapper target.
        lsan_options: Optional base LSAN_OPTIONS.
        binary: The sanitizer_wrapper executable; defaults to the static build
            of this module. Pass a prebuilt one to avoid rules_rust.
        **kwargs: Other common attributes (testonly, ...).
    """
    _sanitizer_wrapper(
        name = name,
        binary = binary,
        llvm_symbolizer = llvm_symbolizer,
        asan_options = asan_options,
        tsan_options = tsan_options,
        lsan_options = lsan_options,
        asan_ignore_list = asan_ignore_list,
        lsan_ignore_list = lsan_ignore_list,
        tsan_ignore_list = tsan_ignore_list,
        run_under = run_under,
        additional_data = additional_data,
        tags = tags,
        visibility = visibility,
        **kwargs
    )

_TAG_TABLE_SUFFIX = ".tag_filters.conf"

# What a config name may hold: tag_filters reads a table line's name with
# exactly this rule (letters, digits, '_', '-' and '.', not starting with
# '-'), so that a name written here is the name the binary defines.
_CONFIG_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-."

def _check_config_name(owner, name):
    """A config name as tag_filters reads it from the table file."""
    if name in ["base", "preset"]:
        fail("{}: '{}' cannot be a config name".format(owner, name))
    if not name or name.startswith("-"):
        fail("{}: bad config name {} (letters, digits, '_', '-' and '.', not starting with '-')".format(
            owner,
            repr(name),
        ))
    for i in range(len(name)):
        if name[i] not in _CONFIG_NAME_CHARS:
            fail("{}: bad config name {}: {} is not a letter, digit, '_', '-' or '.'".format(
                owner,
                repr(name),
                repr(name[i]),
            ))
    return name

def _check_tag_word(owner, what, value):
    """A tag (or a preset's name) as the tag table file accepts it."""
    bare = value[1:] if value.startswith("-") else value
    if not bare or bare.startswith("-"):
        fail("{}: bad {} {}".format(owner, what, repr(value)))
    for bad in [",", "=", " ", "\t", "\n", "\r", "#", "*", "?", "[", "'", "\"", "\\", "$"]:
        if bad in value:
            fail("{}: {} {} must not contain {}".format(owner, what, repr(value), repr(bad)))
    for bad in _TAG_CONTROL_OR_SPACE:
        if bad in value:
            fail("{}: {} {} must not contain whitespace or a control character".format(owner, what, repr(value)))
    return value

# What the table file refuses in a tag beyond the characters above: every
# control character and every Unicode whitespace (Rust's is_control and
# is_whitespace). Bazel holds a BUILD file's UTF-8 one byte per character,
# so the non-ASCII ones are their UTF-8 bytes: U+0080-U+00A0 (C1 controls,
# NEL, no-break space), U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
# U+205F and U+3000.
_TAG_CONTROL_OR_SPACE = (
    ["\000", "\001", "\002", "\003", "\004", "\005", "\006", "\007", "\010", "\013", "\014", "\016", "\017"] +
    ["\020", "\021", "\022", "\023", "\024", "\025", "\026", "\027", "\030", "\031", "\032", "\033"] +
    ["\034", "\035", "\036", "\037", "\177"] +
    ["\302" + c for c in "\200\201\202\203\204\205\206\207\210\211\212\213\214\215\216\217".elems()] +
    ["\302" + c for c in "\220\221\222\223\224\225\226\227\230\231\232\233\234\235\236\237\240".elems()] +
    ["\341\232\200", "\342\201\237", "\343\200\200"] +
    ["\342\200" + c for c in "\200\201\202\203\204\205\206\207\210\211\212\250\251\257".elems()]
)

def _tag_filters_impl(ctx):
    executable = _link_binary(ctx)
    owner = str(ctx.label)
    if ctx.attr.preset:
        if ctx.attr.base_tags or ctx.attr.config_names:
            fail("{}: give either preset or base_tags and configs, not both".format(owner))
        lines = [
            "# tag_filters table for {}: the compiled-in preset.".format(owner),
            "preset = " + _check_tag_word(owner, "preset", ctx.attr.preset),
        ]
    else:
        lines = _tag_table_lines(ctx, owner)
    table = ctx.actions.declare_file(ctx.label.name + _TAG_TABLE_SUFFIX)
    ctx.actions.write(output = table, content = "\n".join(lines) + "\n")
    binary, binary_file = _binary(ctx)
    return [DefaultInfo(
        executable = executable,
        files = depset([executable, table]),
        runfiles = _merge_runfiles(ctx, [executable, binary_file, table], [binary]),
    )]

def _tag_table_lines(ctx, owner):
    """The lines of the project's own tag table."""
    lines = ["# tag_filters table for {}: 'base' first, then each config in order.".format(owner)]
    lines.append("base = " + ",".join([_check_tag_word(owner, "tag", t) for t in ctx.attr.base_tags]))
    for config in ctx.attr.config_names:
        _check_config_name(owner, config)
        tags = ctx.attr.config_tags.get(config, [])
        lines.append("{} = {}".format(config, ",".join([_check_tag_word(owner, "tag", t) for t in tags])))
    return lines

_tag_filters = rule(
    implementation = _tag_filters_impl,
    executable = True,
    attrs = {
        "base_tags": attr.string_list(doc = "The base list, e.g. [\"-no_gpu\", \"-requires-gpu-nvidia\"]."),
        "binary": _binary_attr(Label("//:tag_filters"), "The tag_filters executable."),
        # A string_list_dict does not promise its order on every Bazel, so the
        # order of the configs travels as a list of its own.
        "config_names": attr.string_list(doc = "The config names, in order."),
        "config_tags": attr.string_list_dict(doc = "The tags each config appends."),
        "preset": attr.string(doc = "A compiled-in table (e.g. \"jax-rocm\") instead of base_tags and configs."),
        "_allowlist_function_transition": _TRANSITION_ALLOWLIST,
    },
    doc = "A `bazel run` target printing the tag filter of the project's own tag table.",
)

def tag_filters(name, base_tags = [], configs = {}, preset = None, binary = None, **kwargs):
    """A `bazel run` target that prints the project's own tag filters.

    `bazel run //pkg:<name> -- --config=ci_single_gpu` prints the base list
    followed by that config's tags; `-- --format=bazelrc` prints a
    `build:`/`test:` line per config; `-- --help` lists the table.

    Args:
        name: Name of the target.
        base_tags: The tags every filter starts with, in order.
        configs: A dict from config name to the tags it appends, in order;
            e.g. {"ci_single_gpu": ["requires-gpu-amd", "-multi_gpu"]}.
            A name is letters, digits, '_', '-' and '.', not starting
            with '-' (nor "base" or "preset"); another fails the analysis.
        preset: Instead of base_tags and configs, the name of a table
            compiled into tag_filters: "xla-rocm", "jax-rocm",
            "xla-rocm-compile" or "rocm-dev-infra" (`tag_filters --help`
            lists them). A name the
            binary does not know fails when the target runs, with the list.
        binary: The tag_filters executable; defaults to the static build of
            this module. Pass a prebuilt one to avoid rules_rust.
        **kwargs: Common attributes (tags, visibility, testonly, ...).
    """
    _tag_filters(
        name = name,
        binary = binary,
        base_tags = base_tags,
        config_names = list(configs.keys()),
        config_tags = configs,
        preset = preset or "",
        **kwargs
    )

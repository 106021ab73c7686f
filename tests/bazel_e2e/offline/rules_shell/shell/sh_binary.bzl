"""sh_binary as rules_shell exports it, for Bazel 4.2."""

sh_binary = native.sh_binary

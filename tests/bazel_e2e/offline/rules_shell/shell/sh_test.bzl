"""sh_test as rules_shell exports it, for Bazel 4.2."""

sh_test = native.sh_test

//! Cross-binary integration tests (filled in as the binaries land).

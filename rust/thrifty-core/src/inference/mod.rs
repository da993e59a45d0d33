//! (filled in by the inference capability)

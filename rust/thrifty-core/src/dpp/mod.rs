//! (filled in by the dpp capability)

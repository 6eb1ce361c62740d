"""One-off investigations kept for the record: each justified a decision (see README.md here)."""

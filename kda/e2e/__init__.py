"""The end-to-end tier: model blocks of the pinned release as benchmark subjects (docs/e2e.md)."""

"""Foundations every layer may use: errors, repository paths, git, the GPU probe, and file schemas."""

"""kda: evidence-first GPU kernel optimization campaigns."""

__version__ = "0.1.0"

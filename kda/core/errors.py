"""One error type for everything a person or agent wrote wrong: the message names the file, key and row."""


class KdaError(Exception):
    """A problem the user can fix; printed without a traceback by the CLI."""

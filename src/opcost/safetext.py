"""Text that came from users or from a store (labels, run references,
parameters), made safe to print: one line, no terminal control. Imported by
cli, so it stays tiny."""


def printable(text) -> str:
    """`text` with control characters and other unprintable ones escaped
    (\\n, \\x1b, \\u202e), so that it prints on one line and cannot drive the
    terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))

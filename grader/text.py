"""Text from a student made safe to store: valid UTF-8, no NUL or control characters, bounded length.

Exception messages, answers and printed output come from student code, which can put a lone
UTF-16 surrogate (SQLite and UTF-8 files cannot store it) or a NUL (PostgreSQL cannot) in any
of them. Everything the grader records passes through `safe_text` once, at the boundary.
"""

from __future__ import annotations

import re

MAX_TEXT_CHARS = 200_000
CUT_NOTE = " […cut]"
MARKUP = re.compile(r"[<>&\"'`]")
SURROGATE = re.compile("[\ud800-\udfff]")
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")  # all but tab, newline and carriage return


def safe_text(value, limit: int = MAX_TEXT_CHARS) -> str:
    """`value` as storable text: lone surrogates become U+FFFD, NUL and other control characters
    (tab, newline and carriage return aside) are dropped, and it has at most `limit` characters.

    >>> safe_text("a\\x00b" + chr(0xD800))
    'ab\\ufffd'
    >>> safe_text("x" * 20, limit=10)
    'xxx […cut]'
    """
    text = value if isinstance(value, str) else str(value)
    text = SURROGATE.sub("\ufffd", CONTROL.sub("", text))
    if len(text) > limit:
        text = text[: max(limit - len(CUT_NOTE), 0)] + CUT_NOTE
    return text


def is_safe_name(name: str) -> bool:
    """Whether a file name can be stored as an id: safe_text leaves it unchanged, it is printable and
    holds no markup character (formgrader writes student ids into its pages unescaped)."""
    return bool(name) and safe_text(name, 200) == name and name.isprintable() and not MARKUP.search(name)

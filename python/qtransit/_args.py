"""The integer arguments of the API, checked before anything runs, as the command line checks its
flags: a float, a bool or a string where an integer belongs is a TypeError (1.5 is never truncated
to 1), a value out of range a ValueError, and each message names the keyword as the caller wrote it.
Numpy integers are integers."""

import operator

_I64 = (1 << 63) - 1
_U64 = (1 << 64) - 1


def _range_text(lo, hi):
    if hi == _U64 and lo == 0:
        return "an integer from 0 to 2^64 - 1"
    if lo == 1:
        return "a positive integer"
    if lo == 0:
        return "a non-negative integer"
    return f"an integer from {lo}"


def integer(value, name, *, lo=0, hi=_I64, alt=""):
    """value as an int in [lo, hi]; alt: what else the keyword takes, for the message (", or None
    for the format's own")."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name}={value!r}: {_range_text(lo, hi)}{alt}, not {type(value).__name__}")
    v = operator.index(value)
    if v < lo or v > hi:
        raise ValueError(f"{name}={v}: {_range_text(lo, hi)}{alt}")
    return v


def block(value, name="block", own="the format's own"):
    """A block size: None (sent as 0, the native layer's "its own") or a positive integer."""
    if value is None:
        return 0
    return integer(value, name, lo=1, alt=f", or None for {own}")


def seed(value, name="seed"):
    return integer(value, name, lo=0, hi=_U64)


def integers(value, name, *, lo=1):
    """One integer or a sequence of them (ranks=[8, 64]), each in range."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name}={value!r}: an integer or a list of integers")
    if hasattr(type(value), "__index__") and not isinstance(value, bool):
        return [integer(value, name, lo=lo)]
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{name}={value!r}: an integer or a list of integers") from None
    return [integer(v, f"{name}[{i}]", lo=lo) for i, v in enumerate(items)]

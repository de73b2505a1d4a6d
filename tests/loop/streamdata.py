"""Test data for byte streams."""


def pattern(n: int) -> bytes:
    """n bytes that reveal reordering, loss or duplication (not a short cycle)."""
    block = bytes(range(251)) * 4
    out = bytearray()
    i = 0
    while len(out) < n:
        out += i.to_bytes(4, "little") + block
        i += 1
    return bytes(out[:n])

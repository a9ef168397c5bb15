# The helpers the generated readers call (schemas/_readers.pyx includes this file): Cython twins of the ones in
# schemas/compiled.py, with C types, so a reader stays the same source whether it runs compiled or in Python.

import struct
from swarmlog.schemas import records as _records

_float = struct.Struct("<f").unpack_from
_double = struct.Struct("<d").unpack_from


cdef (long long, Py_ssize_t) _long(bytes b, Py_ssize_t p) except *:
    """A zig-zag varint at `p`, and the position after it; ValueError past 64 bits."""
    cdef unsigned long long result = 0, byte
    cdef int shift = 0
    while True:
        byte = b[p]
        p += 1
        if shift == 63 and byte > 1:
            raise ValueError("varint past 64 bits")
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return <long long>((result >> 1) ^ (0 - (result & 1))), p
        shift += 7


cdef inline long long _int(long long value) except? -1:
    if not -2147483648 <= value < 2147483648:
        raise ValueError(f"{value} is out of the int range")
    return value


cdef inline Py_ssize_t _length(long long value, Py_ssize_t pos, Py_ssize_t size) except -1:
    if value < 0 or pos + value > size:
        raise ValueError("bad length")
    return pos + value


cdef inline bint _boolean(long long byte) except -1:
    if byte > 1:
        raise ValueError(f"boolean byte {byte}")
    return byte == 1

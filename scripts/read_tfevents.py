#!/usr/bin/env python3
"""Dump a TensorBoard event file as JSON lines, using only the standard library.

An independent reader for lmtrain's hand-encoded event files (observe/tfevents_writer.cpp):
it checks both masked CRC-32C checksums of every TFRecord and decodes the Event fields
TensorBoard uses for scalars. Usage: read_tfevents.py EVENTS_FILE
Each output line: {"wall_time": float, "step": int, "file_version": str?,
                   "scalars": [[tag, value], ...]}
"""
import json
import struct
import sys


def _crc32c_table():
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ _TABLE[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_varint(buf, pos):
    result, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def fields(buf):
    """Yields (field number, wire type, value) for one protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError("unsupported wire type %d" % wire)
        yield field, wire, value


def decode_event(data):
    event = {"wall_time": 0.0, "step": 0, "scalars": []}
    for field, _, value in fields(data):
        if field == 1:
            event["wall_time"] = struct.unpack("<d", value)[0]
        elif field == 2:
            event["step"] = value - (1 << 64) if value >= 1 << 63 else value
        elif field == 3:
            event["file_version"] = value.decode()
        elif field == 5:
            for sfield, _, svalue in fields(value):
                if sfield != 1:
                    continue
                tag, simple = None, None
                for vfield, _, vvalue in fields(svalue):
                    if vfield == 1:
                        tag = vvalue.decode()
                    elif vfield == 2:
                        simple = struct.unpack("<f", vvalue)[0]
                event["scalars"].append([tag, simple])
    return event


def read_records(path):
    raw = open(path, "rb").read()
    pos = 0
    while pos < len(raw):
        if pos + 12 > len(raw):
            raise ValueError("%s: truncated record header at byte %d" % (path, pos))
        header = raw[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (len_crc,) = struct.unpack("<I", raw[pos + 8:pos + 12])
        if masked_crc32c(header) != len_crc:
            raise ValueError("%s: bad length crc at byte %d" % (path, pos))
        data = raw[pos + 12:pos + 12 + length]
        if len(data) != length or pos + 16 + length > len(raw):
            raise ValueError("%s: truncated record at byte %d" % (path, pos))
        (data_crc,) = struct.unpack("<I", raw[pos + 12 + length:pos + 16 + length])
        if masked_crc32c(data) != data_crc:
            raise ValueError("%s: bad data crc at byte %d" % (path, pos))
        yield data
        pos += 16 + length


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for data in read_records(sys.argv[1]):
        print(json.dumps(decode_event(data)))


if __name__ == "__main__":
    main()

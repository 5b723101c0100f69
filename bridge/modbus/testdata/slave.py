#!/usr/bin/python3
"""A real Modbus slave for edgeq's tests: pymodbus (Debian's python3-pymodbus).

  slave.py rtu PATH BAUD UNIT...   RTU on a serial device (a pty in the tests)
  slave.py tcp UNIT...             TCP on 127.0.0.1, a free port

It prints "READY <port>" (0 for RTU) once it serves. Each unit holds the
same map (see the test's register map), with the unit ID in holding 17 and
a counter in holding 0 that goes up every 50ms; holding registers end at 29,
so reading 30 and up gets exception 2 (illegal data address).
"""
import asyncio
import logging
import math
import struct
import sys
import time

from pymodbus.datastore import (ModbusSequentialDataBlock, ModbusServerContext,
                                ModbusSlaveContext)
from pymodbus.framer.rtu_framer import ModbusRtuFramer
from pymodbus.server.async_io import ModbusSerialServer, ModbusTcpServer

logging.basicConfig(level=logging.WARNING)

HOLDING = 30


def words(fmt, value, byte_swap=False, word_swap=False):
    """Registers of value packed big-endian, then reordered like a device."""
    b = struct.pack(">" + fmt, value)
    ws = [b[i:i + 2] for i in range(0, len(b), 2)]
    if word_swap:
        ws.reverse()
    if byte_swap:
        ws = [w[::-1] for w in ws]
    return [int.from_bytes(w, "big") for w in ws]


def holding(unit):
    h = [0] * HOLDING
    h[1] = words("h", -1234)[0]
    h[2:4] = words("I", 305419896)                        # uint32 ABCD
    h[4:6] = words("i", -100000, word_swap=True)          # int32 CDAB
    h[6:8] = words("f", 230.5)                            # float32 ABCD
    h[8:10] = words("f", 12.25, word_swap=True)           # float32 CDAB
    h[10:12] = words("f", -3.5, byte_swap=True)           # float32 BADC
    h[12:16] = words("d", 1234.5678, byte_swap=True, word_swap=True)  # float64 DCBA
    h[16] = 2301                                          # 230.1 with scale 0.1
    h[17] = unit
    s = f"EDGEQ-{unit:02d}".encode().ljust(8, b"\0")
    h[18:22] = [int.from_bytes(s[i:i + 2], "big") for i in range(0, 8, 2)]
    h[22] = 2500                                          # 25.00 with scale 0.01
    return h


def make_context(units):
    slaves = {}
    for u in units:
        slaves[u] = ModbusSlaveContext(
            co=ModbusSequentialDataBlock(0, [1, 0, 1, 1, 0, 0, 0, 1, 1, 1]),
            di=ModbusSequentialDataBlock(0, [0, 1, 1, 0]),
            hr=ModbusSequentialDataBlock(0, holding(u)),
            ir=ModbusSequentialDataBlock(0, [0] * 4),
            zero_mode=True)
    return ModbusServerContext(slaves=slaves, single=False)


async def tick(ctx, units):
    n = 0
    t0 = time.monotonic()
    while True:
        await asyncio.sleep(0.05)
        n = (n + 1) & 0xFFFF
        t = time.monotonic() - t0
        for u in units:
            ctx[u].setValues(3, 0, [n])
            ctx[u].setValues(3, 22, words("h", int(2500 + 500 * math.sin(t))))
            ctx[u].setValues(4, 0, words("f", t))


async def main():
    mode = sys.argv[1]
    if mode == "rtu":
        path, baud = sys.argv[2], int(sys.argv[3])
        units = [int(u) for u in sys.argv[4:]]
        ctx = make_context(units)
        server = ModbusSerialServer(ctx, framer=ModbusRtuFramer, port=path, baudrate=baud,
                                    bytesize=8, parity="N", stopbits=1, timeout=0.01,
                                    ignore_missing_slaves=True)
        await server.start()
        port = 0
    else:
        units = [int(u) for u in sys.argv[2:]]
        ctx = make_context(units)
        server = ModbusTcpServer(ctx, address=("127.0.0.1", 0), allow_reuse_address=True,
                                 ignore_missing_slaves=True)
        asyncio.create_task(server.serve_forever())
        await server.serving
        port = server.server.sockets[0].getsockname()[1]
    asyncio.create_task(tick(ctx, units))
    print(f"READY {port}", flush=True)
    while True:
        await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main())

"""A slow network in front of an S3 server, for tests/bench/bench_s3.sh.

  delay_proxy.py LISTEN_PORT UPSTREAM_PORT DELAY_MS

listens on 127.0.0.1:LISTEN_PORT and relays each connection to
127.0.0.1:UPSTREAM_PORT (HTTP/1.1, keep-alive), holding every new
connection and every request DELAY_MS milliseconds before it goes on: what
a network of that round trip adds to each request (as `tc netem delay` on
the server's link would, where the kernel has netem; this one has not).
It counts what passes: requests by kind (HEAD, GET of a range, GET of a
whole object, a listing, other), connections, and bytes each way.  A GET
of /__proxy/stats answers those counters as JSON (not relayed, not
counted).  With PROXY_LOG=FILE in its environment, each request is also
a line of FILE: the time, the method, the target and the range asked
for (to tell which operation sent which request).  Runs until killed;
loopback only.
"""
import asyncio
import json
import os
import sys
import time
import urllib.parse

LISTEN, UPSTREAM, DELAY = int(sys.argv[1]), int(sys.argv[2]), \
    float(sys.argv[3]) / 1000
HEAD_MAX = 64 * 1024
stats = {"requests": 0, "connections": 0, "bytes_down": 0, "bytes_up": 0,
         "kinds": {}}
LOG = open(os.environ["PROXY_LOG"], "a", buffering=1) \
    if os.environ.get("PROXY_LOG") else None


def kind(method, target, headers):
    """The kind of an S3 request, for the counters."""
    url = urllib.parse.urlsplit(target)
    query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
    parts = [p for p in url.path.split("/") if p]
    if method == "HEAD":
        return "HEAD"
    if method == "GET" and ("list-type" in query or len(parts) <= 1):
        return "LIST"
    if method == "GET" and "range" in headers:
        return "GET range"
    if method == "GET":
        return "GET whole"
    return method


def count(name, n=1):
    stats["kinds"][name] = stats["kinds"].get(name, 0) + n


async def pump(reader, writer, key):
    """Relay bytes reader -> writer until EOF, counting them in key."""
    try:
        while True:
            data = await reader.read(1 << 20)
            if not data:
                break
            stats[key] += len(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            writer.write_eof()
        except (OSError, RuntimeError):
            pass


async def body(reader, writer, headers):
    """Relay a request's body: Content-Length or chunked."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            line = await reader.readuntil(b"\r\n")
            writer.write(line)
            size = int(line.split(b";")[0], 16)
            if size == 0:
                while True:  # trailers, up to the empty line
                    line = await reader.readuntil(b"\r\n")
                    writer.write(line)
                    if line == b"\r\n":
                        return
            writer.write(await reader.readexactly(size + 2))
            await writer.drain()
    n = int(headers.get("content-length", "0"))
    while n > 0:
        data = await reader.read(min(n, 1 << 20))
        if not data:
            raise asyncio.IncompleteReadError(b"", n)
        n -= len(data)
        writer.write(data)
        await writer.drain()


async def client(creader, cwriter):
    up_writer = None
    try:
        head = await creader.readuntil(b"\r\n\r\n")
        if head.startswith(b"GET /__proxy/stats "):
            out = json.dumps(stats).encode()
            cwriter.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json"
                          b"\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                          % len(out) + out)
            await cwriter.drain()
            return
        stats["connections"] += 1
        await asyncio.sleep(DELAY)  # the connection's handshake
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1",
                                                             UPSTREAM)
        down = asyncio.ensure_future(pump(up_reader, cwriter, "bytes_down"))
        while True:
            lines = head.decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            stats["requests"] += 1
            stats["bytes_up"] += len(head)
            count(kind(method, target, headers))
            if LOG:
                LOG.write("%.6f %s %s %s\n" % (time.time(), method, target,
                                               headers.get("range", "-")))
            await asyncio.sleep(DELAY)
            up_writer.write(head)
            await body(creader, up_writer, headers)
            await up_writer.drain()
            try:
                head = await creader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
        up_writer.write_eof()
        await down
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
            ConnectionError, ValueError):
        pass
    finally:
        for w in (cwriter, up_writer):
            if w is not None:
                w.close()


async def main():
    server = await asyncio.start_server(client, "127.0.0.1", LISTEN,
                                        limit=HEAD_MAX)
    async with server:
        await server.serve_forever()


asyncio.run(main())

"""Why MosaicML Streaming stalled in tests/bench/bench_s3.sh: a boto3 client
used before a fork, then used by the forked children.

  fork_client.py URL BUCKET KEY... [--fresh]

What Streaming 0.13.0 does: the rank's process downloads index.json with
its stream's downloader (a boto3 client, whose pool keeps the kept-alive
connection), then the DataLoader forks its workers, which inherit that
client and its socket, and each downloads its shards with it
(download_file: a HEAD, then 8 MB ranges).  Two processes then write
requests into one connection and read each other's responses: a download
fails ("did not match expected ETag", a 412 on the HEAD), or one process
reads both responses and the other waits for its own until botocore's
read timeout (Streaming sets 60 s, this script 5 s).  The server or a
proxy in between cannot tell; without the proxy it happens too (seen
here on versitygw direct), less often, as its answers come sooner.

This script does the same with two children, six downloads each, and
exits 1 if any failed or waited a timeout; with --fresh the parent drops
its client before forking (what bench_s3.py does to Streaming's
downloaders, with their own clean_up()), and nothing fails.
"""
import os
import sys
import time

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config


def client(url):
    return boto3.client("s3", endpoint_url=url, config=Config(
        s3={"addressing_style": "path"}, read_timeout=5,
        retries={"max_attempts": 1}))


def child(s3, url, bucket, keys, c, out):
    if s3 is None:
        s3 = client(url)
    bad = 0
    for j in range(6):
        key = keys[(c + j) % len(keys)]
        t = time.time()
        try:
            s3.download_file(bucket, key, out,
                             Config=TransferConfig(use_threads=False))
        except Exception as e:  # noqa: BLE001 (any failure counts)
            print("child %d: %s: %s after %.1f s"
                  % (c, key, repr(e)[:120], time.time() - t), flush=True)
            bad += 1
    return bad


def main():
    args = [a for a in sys.argv[1:] if a != "--fresh"]
    fresh = "--fresh" in sys.argv[1:]
    url, bucket, keys = args[0], args[1], args[2:]
    s3 = client(url)
    s3.head_object(Bucket=bucket, Key=keys[0])  # the parent's index.json
    if fresh:
        s3 = None
    pids = []
    for c in range(2):
        pid = os.fork()
        if pid == 0:
            out = "/tmp/fork_client-%d-%d" % (os.getppid(), c)
            try:
                bad = child(s3, url, bucket, keys, c, out)
            finally:
                if os.path.exists(out):
                    os.unlink(out)
            os._exit(1 if bad else 0)
        pids.append(pid)
    failed = sum(os.waitpid(p, 0)[1] != 0 for p in pids)
    print("%s client: %d of 2 children failed"
          % ("fresh" if fresh else "inherited", failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The S3 test's client, run with the boto3 of tests/mount/s3/requirements-s3.txt:

  bucket.py ENDPOINT BUCKET upload DIR    create BUCKET, upload every file
                                          under DIR keyed by its path
                                          relative to DIR (no directory
                                          objects: as `aws s3 sync` does)
  bucket.py ENDPOINT BUCKET put KEY FILE  upload FILE as KEY
  bucket.py ENDPOINT BUCKET delete KEY    delete one object

The access key and secret come from AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY.  Prints one line per upload; exits 1 on failure."""
import os
import sys

import boto3
from botocore.config import Config

endpoint, bucket, what, arg = sys.argv[1:5]

s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  config=Config(s3={"addressing_style": "path"}))
if what == "upload":
    s3.create_bucket(Bucket=bucket)
    n = 0
    for root, dirs, files in os.walk(arg):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            key = os.path.relpath(path, arg)
            s3.upload_file(path, bucket, key)
            n += 1
    keys = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket) for o in p.get("Contents", [])]
    print("uploaded %d objects, listed %d" % (n, len(keys)))
    sys.exit(0 if len(keys) == n else 1)
elif what == "put":
    s3.upload_file(sys.argv[5], bucket, arg)
elif what == "delete":
    s3.delete_object(Bucket=bucket, Key=arg)
else:
    sys.exit("bucket.py: unknown command %s" % what)

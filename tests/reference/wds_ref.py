"""Python webdataset 1.0.2 and braceexpand 0.1.7: the reference for glassbox's tar shards
(webdataset_test.cpp and the data pack CLI test).

  wds_ref.py expand PATTERN...         # JSON: one list of expansions per pattern
  wds_ref.py read URL_PATTERN          # JSON: the samples webdataset reads, in order
  wds_ref.py write PATTERN MAXCOUNT MAXSIZE N   # ShardWriter writes N samples; JSON: what it wrote
  wds_ref.py tricky TAR                # a tar with awkward member names, written by tarfile

A sample is {"key", "url", "parts": {suffix: hex of the bytes}}; `read` keeps webdataset's own
grouping (no decoding, shards in order, no shuffle).
"""
import io
import json
import sys
import tarfile

import braceexpand
import webdataset as wds

assert wds.__version__ == "1.0.2", f"webdataset {wds.__version__}, the reference needs 1.0.2"


def sample_json(s):
    parts = {k: v.hex() for k, v in s.items() if not k.startswith("__")}
    return {"key": s["__key__"], "url": s["__url__"], "parts": parts}


def read(pattern):
    ds = wds.WebDataset(pattern, shardshuffle=False, empty_check=False)
    return [sample_json(s) for s in ds]


def sample_bytes(i):
    # deterministic, varied sizes: an "image", a label, sometimes a JSON member
    body = bytes((i * 37 + j * 11) % 256 for j in range(50 + (i * 131) % 700))
    s = {"__key__": f"s{i:05d}", "jpg": body, "cls": str(i % 3).encode()}
    if i % 4 == 0:
        s["json"] = json.dumps({"label": i % 3, "i": i}).encode()
    return s


def write(pattern, maxcount, maxsize, n):
    written = []
    with wds.ShardWriter(pattern, maxcount=int(maxcount), maxsize=float(maxsize), verbose=0, mtime=0) as w:
        for i in range(int(n)):
            s = sample_bytes(i)
            shard = w.shard  # the shard the next write opens, or the one it continues
            w.write(s)
            written.append({"key": s["__key__"], "shard": pattern % (w.shard - 1),
                            "parts": {k: v.hex() for k, v in s.items() if not k.startswith("__")}})
    return written


def tricky(path):
    members = [
        ("a.b/c.jpg", b"dir with a dot"),
        ("a.b/c.cls", b"1"),
        ("x.seg.png", b"two dots"),
        ("x.CLS", b"2"),
        ("__meta__", b"skipped meta"),
        ("__dir__/k.txt", b"skipped by skip_meta"),
        ("noext", b"no dot: ignored"),
        ("d/.hidden.jpg", b"starts with a dot"),
        ("ab/.z.jpg", b"odd but matched"),
        ("y.jpg", b"y image"),
        ("y.cls", b"0"),
        ("z.jpg", b"z image"),
        ("y.txt", b"y again, after z: a new sample"),
    ]
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
        ti = tarfile.TarInfo("somedir")
        ti.type = tarfile.DIRTYPE
        t.addfile(ti)
        long_name = "l" * 150 + "/k.jpg"
        ti = tarfile.TarInfo(long_name)
        ti.size = 3
        t.addfile(ti, io.BytesIO(b"pax"))
    return read(path)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "expand":
        out = [list(braceexpand.braceexpand(p)) for p in args]
    elif cmd == "read":
        out = read(args[0])
    elif cmd == "write":
        out = write(*args)
    elif cmd == "tricky":
        out = tricky(args[0])
    else:
        raise SystemExit(f"unknown command {cmd}")
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

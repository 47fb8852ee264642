#!/usr/bin/env python3
"""Extracts the English training text for the tiny model from a Debian package.

Source: Debian 12 package `r-cran-janeaustenr` (1.0.0-1), "Jane Austen's Complete Novels": the
full texts of Sense and Sensibility, Pride and Prejudice, Mansfield Park, Emma, Northanger Abbey
and Persuasion (Project Gutenberg texts, public domain), packaged by Julia Silge under the MIT
licence (debian/copyright: "Files: * Copyright: 2016-2017 Julia Silge, License: MIT").

The package stores each novel as an R character vector (one element a line) in R's lazy-load
database data/Rdata.rdb: zlib-compressed R serialisations (format 3). This script reads that
format directly (no R needed), joins the wrapped lines of each paragraph with spaces, and writes
the novels separated by blank lines, paragraphs separated by "\n\n".

    apt-get download r-cran-janeaustenr          # any directory
    python3 tools/extract_austen.py r-cran-janeaustenr_*.deb -o austen.txt

Uses only the standard library (and `dpkg-deb` to unpack the .deb).
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile
import zlib

RDB = "usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"


def rdb_objects(data):
    """The decompressed serialisations in a lazy-load .rdb (each: u32 BE length + zlib stream)."""
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        d = zlib.decompressobj()
        out = d.decompress(data[pos + 4:])
        if len(out) != n:
            raise ValueError(f"rdb object at {pos}: {len(out)} bytes, header says {n}")
        yield out
        pos = len(data) - len(d.unused_data)


def r_strings(obj):
    """The elements of a serialised R character vector (STRSXP)."""
    if obj[:2] != b"X\n":
        raise ValueError("not an XDR R serialisation")
    p = 2
    ver, _, _ = struct.unpack(">iii", obj[p:p + 12])
    p += 12
    if ver == 3:
        (ne,) = struct.unpack(">i", obj[p:p + 4])
        p += 4 + ne
    flags, n = struct.unpack(">ii", obj[p:p + 8])
    p += 8
    if flags & 0xFF != 16:
        raise ValueError(f"expected a character vector, found SEXP type {flags & 0xFF}")
    lines = []
    for _ in range(n):
        _, ln = struct.unpack(">ii", obj[p:p + 8])
        p += 8
        if ln < 0:
            lines.append("")
            continue
        lines.append(obj[p:p + ln].decode("utf-8"))
        p += ln
    return lines


def paragraphs(lines):
    out, cur = [], []
    for ln in lines:
        s = ln.strip()
        if s:
            cur.append(s)
        elif cur:
            out.append(" ".join(cur))
            cur = []
    if cur:
        out.append(" ".join(cur))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("deb", help="r-cran-janeaustenr_*.deb, or the Rdata.rdb file itself")
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()
    if args.deb.endswith(".deb"):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["dpkg-deb", "-x", args.deb, tmp], check=True)
            with open(os.path.join(tmp, RDB), "rb") as f:
                data = f.read()
    else:
        with open(args.deb, "rb") as f:
            data = f.read()
    novels = ["\n\n".join(paragraphs(r_strings(o))) for o in rdb_objects(data)]
    text = "\n\n\n".join(novels) + "\n"
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    sys.stderr.write(f"extract_austen.py: {len(novels)} novels, {len(text)} characters -> {args.out}\n")


if __name__ == "__main__":
    main()

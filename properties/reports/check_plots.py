#!/usr/bin/env python3
"""Render report.html in headless Chromium and check that every plot is there and not blank.

usage: check_plots.py CHROMIUM REPORT_HTML WORKDIR

Each <svg class="plot" id="plot-..."> of the report is also written alone into its own page and
rendered to a PNG; the PNG is decoded (zlib, standard library only) and its pixels counted: a plot
passes when at least 1% of its pixels are not the white background and at least 0.05% are neither
white nor grey (the series' colours). The whole report is rendered too and must not be blank.
Prints one line per plot; exit 0 when all pass, 1 otherwise.
"""
import re, struct, subprocess, sys, zlib, os


def decode_png(path):
    data = open(path, 'rb').read()
    assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
    pos, idat, w = 8, b'', 0
    while pos < len(data):
        n, = struct.unpack('>I', data[pos:pos + 4]); typ = data[pos + 4:pos + 8]; body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if typ == b'IHDR':
            w, h, depth, ctype, _, _, interlace = struct.unpack('>IIBBBBB', body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, 'unsupported PNG %d/%d' % (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif typ == b'IDAT':
            idat += body
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f = raw[i]; line = bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line)); prev = line
    return w, h, bpp, rows


def count(path):
    w, h, bpp, rows = decode_png(path)
    ink = colour = 0
    for row in rows:
        for x in range(0, w * bpp, bpp):
            r, g, b = row[x], row[x + 1], row[x + 2]
            if r < 245 or g < 245 or b < 245:
                ink += 1
                if max(r, g, b) - min(r, g, b) > 60:
                    colour += 1
    return w * h, ink, colour


def shoot(chromium, html, png, size):
    subprocess.run([chromium, '--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars',
                    '--screenshot=' + png, '--window-size=%d,%d' % size, 'file://' + os.path.abspath(html)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False)
    if not os.path.exists(png):
        raise RuntimeError('chromium wrote no screenshot for ' + html)


def main():
    chromium, report, work = sys.argv[1:4]
    text = open(report, encoding='utf-8').read()
    if re.search(r'<script|https?://(?!www\.w3\.org/2000/svg)', text):
        print('FAIL report.html is not self-contained (script or network reference)'); return 1
    plots = re.findall(r'(<svg [^>]*class="plot"[^>]*>.*?</svg>)', text, re.S)
    ok = True
    if not plots:
        print('FAIL no plot in report.html'); return 1
    shoot(chromium, report, os.path.join(work, 'report.png'), (1600, 2400))
    total, ink, _ = count(os.path.join(work, 'report.png'))
    print('report.png: %d of %d pixels drawn' % (ink, total))
    ok &= ink > total * 0.02
    for svg in plots:
        pid = re.search(r'id="([^"]+)"', svg).group(1)
        w = int(re.search(r'width="(\d+)"', svg).group(1)); h = int(re.search(r'height="(\d+)"', svg).group(1))
        page = os.path.join(work, pid + '.html')
        open(page, 'w', encoding='utf-8').write(
            '<!DOCTYPE html><html><head><meta charset="utf-8"><style>body{margin:0}</style></head><body>%s</body></html>' % svg)
        png = os.path.join(work, pid + '.png')
        shoot(chromium, page, png, (w, h))
        total, ink, colour = count(png)
        good = ink >= total * 0.01 and colour >= total * 0.0005
        print('%s %s: %d of %d pixels drawn, %d in colour' % ('ok  ' if good else 'FAIL', pid, ink, total, colour))
        ok &= good
    print('%d plot(s)' % len(plots))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())

"""The HTML report's fixed parts: the page around the body, its style and its script.

Kept apart from html.py so the renderer reads as Python. A template, not logic:
it stays one file over 400 lines, since its style and script are one piece that
the page's policy names by their hashes. The script only ever
sets ``textContent`` and properties, never ``innerHTML``: every name it shows
comes from the trace, and a frame named ``<lambda>`` must stay text. The page's
Content-Security-Policy runs only this style and script, so the markup carries
no ``on...=`` handlers (the script adds listeners) and no ``style=`` attributes.
"""

from __future__ import annotations

import base64
import hashlib


def document(title: str, body: str, data_json: str, *, css: str = "") -> str:
    """The whole page; ``title`` and ``body`` are escaped HTML, ``data_json`` is script-safe JSON.

    ``css`` is added to the page's style. The page's policy lets only its own style and script run,
    named by their hashes: text that slipped through unescaped still runs nothing.
    """
    style = CSS + css
    policy = (
        f"default-src 'none'; script-src {_digest(SCRIPT)}; style-src {_digest(style)}; "
        "base-uri 'none'; form-action 'none'; require-trusted-types-for 'script'"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title><style>{style}</style></head>\n<body>\n{body}\n"
        f'<script type="application/json" id="rngtrace-data">{data_json}</script>\n'
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def _digest(source: str) -> str:
    """The CSP source expression naming exactly ``source`` as an inline script or style."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii") + "'"


CSS = r"""
:root { --ink:#1c1917; --dim:#78716c; --line:#e7e5e4; --bg:#f5f5f4; --card:#fff; --mine:#e8590c;
        --mine-bg:#fff4e6; --odd:#c92a2a; --mono:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; }
* { box-sizing:border-box; }
body { margin:0; background:var(--bg); color:var(--ink); font:14px/1.45 system-ui,-apple-system,"Segoe UI",
       Roboto,sans-serif; }
code, pre, kbd { font-family:var(--mono); font-size:12.5px; }
kbd { border:1px solid var(--line); border-radius:3px; padding:0 4px; background:#fafaf9; }
header.top { padding:18px 28px 10px; }
.brand { font:600 12px var(--mono); letter-spacing:.08em; color:var(--mine); text-transform:uppercase; }
h1 { margin:2px 0 6px; font-size:22px; }
.summary { margin:0 0 10px; font:13px var(--mono); }
.chips { display:flex; flex-wrap:wrap; gap:8px; }
.chip { background:var(--card); border:1px solid var(--line); border-radius:999px; padding:3px 12px; }
.chip b { margin-right:4px; }
.k-unattributed { color:var(--odd); font-weight:600; }
.meta { color:var(--dim); font-size:12px; margin:8px 0 0; }
.limit { margin:8px 0 0; padding:6px 10px; border-left:3px solid #f59f00; background:#fff9db; }
main, body > section { display:block; }
.card { background:var(--card); border:1px solid var(--line); border-radius:10px; margin:14px 28px;
        padding:14px 18px; box-shadow:0 1px 2px rgba(0,0,0,.04); }
.card-head { display:flex; align-items:baseline; gap:14px; flex-wrap:wrap; }
h2 { font-size:16px; margin:0 0 8px; }
.help { color:var(--dim); font-size:12.5px; }
.legend { display:flex; flex-wrap:wrap; align-items:center; gap:6px; margin:6px 0 10px; }
.legend-title { color:var(--dim); font-size:12px; margin-right:2px; }
.legend .pkg { font:inherit; font-size:13px; border:1px solid var(--line); background:#fafaf9;
               border-radius:6px; padding:2px 8px; cursor:pointer; color:inherit; }
.legend .pkg.on { border-color:var(--ink); background:#fff; }
.legend .n { color:var(--dim); font-size:11.5px; }
.swatch { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:6px;
          vertical-align:-1px; }
.shapes { margin-left:auto; color:var(--dim); font-size:12px; display:flex; align-items:center; gap:6px; }
.shape { display:inline-block; margin-left:10px; }
.shape.draw { width:4px; height:14px; background:#57534e; }
.shape.seed { width:9px; height:9px; background:#57534e; outline:1.5px solid var(--ink); transform:rotate(45deg); }
.shape.odd { width:11px; height:11px; border:2px solid var(--odd); border-radius:50%; background:#fff; }
.shape.entropy { width:0; height:0; border-left:6px solid transparent; border-right:6px solid transparent;
                 border-bottom:11px solid var(--odd); }
.timeline-row { display:flex; gap:14px; align-items:flex-start; }
#chart { position:relative; flex:1 1 auto; min-width:0; user-select:none; cursor:crosshair; }
#chart canvas { display:block; width:100%; }
#chart.dragging { cursor:grabbing; }
#tip { position:absolute; pointer-events:none; background:rgba(28,25,23,.94); color:#fafaf9; padding:6px 9px;
       border-radius:6px; font-size:12px; max-width:440px; white-space:nowrap; overflow:hidden;
       text-overflow:ellipsis; z-index:2; box-shadow:0 2px 8px rgba(0,0,0,.2); }
#tip .t-api { font-family:var(--mono); font-weight:600; }
#tip .t-at { font-family:var(--mono); color:#d6d3d1; }
#detail { flex:0 0 400px; max-width:400px; border:1px solid var(--line); border-radius:8px; padding:10px 12px;
          background:#fafaf9; overflow:auto; position:relative; }
#detail .placeholder { color:var(--dim); margin:0; }
#detail .d-head { display:flex; align-items:center; gap:6px; font-weight:600; }
#detail .d-pin { margin-left:auto; font-weight:400; font-size:11.5px; color:var(--dim); }
#detail .d-api { font:600 13px var(--mono); margin:4px 0 6px; word-break:break-all; }
#detail dl { display:grid; grid-template-columns:max-content 1fr; gap:1px 10px; margin:0 0 8px; font-size:12.5px; }
#detail dt { color:var(--dim); }
#detail dd { margin:0; word-break:break-word; }
#detail dd.odd { color:var(--odd); }
#detail h3 { font-size:12px; color:var(--dim); font-weight:500; margin:8px 0 4px; text-transform:uppercase;
             letter-spacing:.05em; }
ol.stack { list-style:none; margin:0; padding:0; font:12px/1.35 var(--mono); }
ol.stack li { padding:3px 8px; border-radius:4px; color:var(--dim); overflow-wrap:anywhere; }
ol.stack li + li { margin-top:2px; }
ol.stack li.hidden { display:none; }
ol.stack li.fold { cursor:pointer; font-style:italic; padding:1px 8px; }
ol.stack li.fold:hover { color:var(--ink); }
ol.stack li.user { color:var(--ink); }
ol.stack li.mine { background:var(--mine-bg); color:var(--ink); box-shadow:inset 3px 0 0 var(--mine); }
ol.stack li .fn { display:block; color:inherit; font-weight:600; }
ol.stack li .loc { display:block; font-size:11.5px; }
ol.stack li .badge { font:600 10.5px system-ui,sans-serif; color:#fff; background:var(--mine); border-radius:3px;
                     padding:0 4px; margin-left:6px; }
table { border-collapse:collapse; width:100%; font-size:13px; }
th { text-align:left; font-weight:500; color:var(--dim); border-bottom:1px solid var(--line); padding:4px 8px; }
td { padding:4px 8px; border-bottom:1px solid #f5f5f4; vertical-align:top; }
td.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
td.lib code { color:var(--dim); }
td.user code { color:var(--ink); font-weight:500; }
tbody tr { cursor:pointer; }
tbody tr:hover { background:#fafaf9; }
tbody tr.on { background:var(--mine-bg); }
tr.k-unattributed td { color:var(--odd); }
.note { font-size:12px; color:var(--odd); }
.more { color:var(--dim); font-size:12.5px; margin:6px 0 0; }
#hints pre { margin:0 0 8px; white-space:pre; overflow-x:auto; background:#fafaf9; border:1px solid var(--line);
             border-radius:6px; padding:8px 10px; }
.notes { margin:0; padding-left:20px; }
td.odd, td.procs { white-space:nowrap; }
td.odd { color:var(--odd); }
td.procs { color:var(--dim); }
ul.findings { list-style:none; margin:0; padding:0; }
ul.findings li { padding:8px 10px 8px 12px; border-left:3px solid var(--odd); background:#fff5f5; border-radius:4px;
                 cursor:pointer; }
ul.findings li + li { margin-top:8px; }
ul.findings li.on { background:var(--mine-bg); border-left-color:var(--mine); }
ul.findings .f-kind { font-weight:600; color:var(--odd); margin-right:4px; }
ul.findings .fix { margin-top:4px; }
ul.findings .f-events { margin-top:2px; color:var(--dim); font-size:12.5px; }
ul.findings li.risk { border-left-color:var(--dim); background:#f7f7f7; }
ul.findings li.risk .f-kind { color:var(--dim); }
#findings h3 { font-size:13px; margin:10px 0 6px; }
#findings h3:first-of-type { margin-top:0; }
footer { color:var(--dim); font-size:12px; padding:4px 28px 24px; }
@media (max-width:1000px) { .timeline-row { flex-direction:column; } #detail { max-width:none; width:100%;
  position:static; } .card { margin:12px; } header.top { padding:16px 12px 8px; } }
"""

SCRIPT = r"""
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("rngtrace-data").textContent);
  var chart = document.getElementById("chart"), canvas = chart.querySelector("canvas");
  var tip = document.getElementById("tip"), panel = document.getElementById("detail");
  var ctx = canvas.getContext("2d");
  var KINDS = ["draw", "seed", "unattributed", "generator from entropy", "restore"], ODD = "#c92a2a";
  var n = D.site.length, lanes = D.lanes.length, bands = D.laneProcess.length > 0;
  var LABEL_W = bands ? 190 : 150, TOP = 6, AXIS_H = 26, RIGHT = 14;
  var LANE_H = Math.round(Math.min(Math.max(300 / Math.max(lanes, 1), bands ? 66 : 60), 90));
  var laneOf = new Int16Array(n), kindOf = new Int8Array(n), pkgOf = new Int16Array(n);
  var heightOf = new Float32Array(n), rowOf = new Int32Array(n);
  var maxCount = 1, i, s;
  for (i = 0; i < n; i++) { if (D.count[i] > maxCount) maxCount = D.count[i]; }
  var laneLists = [], laneSummary = [], groups = {};
  for (i = 0; i < lanes; i++) { laneLists.push([]); laneSummary.push([0, 0, 0]); }
  for (i = 0; i < n; i++) {
    s = D.sites[D.site[i]];
    laneOf[i] = s[0]; kindOf[i] = s[1]; pkgOf[i] = s[4]; rowOf[i] = s[5];
    var c = D.count[i];
    heightOf[i] = c == null ? 0.35 : 0.35 + 0.65 * Math.log(1 + c) / Math.log(1 + maxCount);
    laneLists[s[0]].push(i); laneSummary[s[0]][s[1]]++;
    var key = s[0] + ":" + s[1] + ":" + s[4];
    (groups[key] = groups[key] || { lane: s[0], kind: s[1], pkg: s[4], list: [] }).list.push(i);
  }
  laneLists = laneLists.map(function (l) { return Int32Array.from(l); });
  var groupList = Object.keys(groups).map(function (k) {
    var g = groups[k]; g.list = Int32Array.from(g.list); return g;
  }).sort(function (a, b) { return a.kind - b.kind || b.list.length - a.list.length; });

  // Where events are denser than the pixels, a lane's draws are binned per call site: a row per site
  // (its SUB - 1 busiest; the rest share the last), a bar per BIN pixels. Zooming in brings the marks back.
  var BIN = 3, DENSE = 0.5, SUB = 4;
  var siteTotal = {}, subRow = {}, subCount = new Int8Array(Math.max(lanes, 1)), oddLists = [];
  for (i = 0; i < n; i++) { if (kindOf[i] === 0) siteTotal[D.site[i]] = (siteTotal[D.site[i]] || 0) + 1; }
  laneLists.forEach(function (list, l) {
    oddLists.push(list.filter(function (idx) { return kindOf[idx] !== 0; }));
    var sites = Object.keys(siteTotal).map(Number).filter(function (k) { return D.sites[k][0] === l; });
    sites.sort(function (a, b) { return siteTotal[b] - siteTotal[a] || a - b; });
    sites.forEach(function (site, r) { subRow[site] = Math.min(r, SUB - 1); });
    subCount[l] = Math.max(1, Math.min(sites.length, SUB));
  });
  var cellAt = {};

  var view = { lo: -0.5, hi: Math.max(n, 1) - 0.5 };
  var hover = -1, pinned = -1, lit = null, litKey = null, drag = null, W = 0, H = 0;

  function plotW() { return Math.max(W - LABEL_W - RIGHT, 10); }
  function xOf(idx) { return LABEL_W + (idx - view.lo) / (view.hi - view.lo) * plotW(); }
  function laneY(l) { return TOP + l * LANE_H; }
  function first(list, v) { var a = 0, b = list.length; while (a < b) { var m = (a + b) >> 1; if (list[m] < v) a = m + 1; else b = m; } return a; }
  function plural(k, word) { return k.toLocaleString() + " " + word + (k === 1 ? "" : "s"); }

  function mark(idx, w) {
    var x = xOf(idx), mid = laneY(laneOf[idx]) + LANE_H / 2, kind = kindOf[idx];
    if (kind === 0) { var h = (LANE_H - 10) * heightOf[idx]; ctx.rect(x - w / 2, mid - h / 2, w, h); }
    else if (kind === 1 || kind === 4) { var r = 6; ctx.moveTo(x, mid - r); ctx.lineTo(x + r, mid); ctx.lineTo(x, mid + r); ctx.lineTo(x - r, mid); ctx.closePath(); }
    else if (kind === 3) { ctx.moveTo(x, mid - 7); ctx.lineTo(x + 6, mid + 5); ctx.lineTo(x - 6, mid + 5); ctx.closePath(); }
    else { ctx.moveTo(x + 6, mid); ctx.arc(x, mid, 6, 0, 2 * Math.PI); }
  }
  function paint(list, kind, color, w) {
    var lo = first(list, Math.floor(view.lo)), hi = first(list, Math.ceil(view.hi) + 1);
    if (hi <= lo) return 0;
    ctx.beginPath();
    for (var k = lo; k < hi; k++) mark(list[k], w);
    if (kind === 0) { ctx.fillStyle = color; ctx.fill(); }
    else {  // a white halo keeps seeds and rings apart from a dense run of draws
      ctx.lineWidth = 4; ctx.strokeStyle = "#fff"; ctx.stroke();
      // a generator from entropy: filled, edged in red; a restore: a seed's diamond, hollow, edged in grey
      ctx.fillStyle = kind === 2 || kind === 4 ? "#fff" : color; ctx.fill();
      ctx.lineWidth = kind === 1 ? 1.5 : 2; ctx.strokeStyle = kind === 1 ? "#1c1917" : kind === 4 ? "#78716c" : ODD; ctx.stroke();
    }
    return hi - lo;
  }

  function dense() { return (view.hi - view.lo) / plotW() > DENSE; }
  function binned() {  // one bar per (call site, bin): its height says how many draws it holds (log scale)
    var lo = Math.floor(view.lo), hi = Math.ceil(view.hi), found = {}, cells = [], maxC = 1, l, k;
    cellAt = {};
    for (l = 0; l < lanes; l++) {
      var list = laneLists[l], a = first(list, lo), b = first(list, hi + 1);
      for (k = a; k < b; k++) {
        var idx = list[k]; if (kindOf[idx] !== 0) continue;
        var col = Math.floor((xOf(idx) - LABEL_W) / BIN), key = D.site[idx] + ":" + col, c = found[key];
        if (!c) { c = found[key] = { site: D.site[idx], lane: l, col: col, n: 0, lo: idx, hi: idx }; cells.push(c); }
        c.n++; c.hi = idx; if (c.n > maxC) maxC = c.n;
      }
    }
    cells.forEach(function (c) {
      var hh = (LANE_H - 10) / subCount[c.lane], r = subRow[c.site];
      var h = Math.max(2, (hh - 2) * (0.3 + 0.7 * Math.log(1 + c.n) / Math.log(1 + maxC)));
      ctx.fillStyle = D.packages[D.sites[c.site][4]][1];
      ctx.fillRect(LABEL_W + c.col * BIN, laneY(c.lane) + 5 + r * hh + (hh - h) / 2, BIN - 1, h);
      var at = c.lane + ":" + r + ":" + c.col, there = cellAt[at];
      if (!there || there.n < c.n) cellAt[at] = c;
    });
    return cells.length;
  }
  function hitCell(mx, my) {
    var l = Math.floor((my - TOP) / LANE_H);
    if (l < 0 || l >= lanes || mx < LABEL_W) return null;
    var hh = (LANE_H - 10) / subCount[l], r = Math.floor((my - laneY(l) - 5) / hh), col = Math.floor((mx - LABEL_W) / BIN);
    if (r < 0 || r >= subCount[l]) return null;
    for (var d = 0; d <= 1; d++) {  // a bar is narrow: the bin beside it answers too
      var c = cellAt[l + ":" + r + ":" + (col - d)] || cellAt[l + ":" + r + ":" + (col + d)];
      if (c) return c;
    }
    return null;
  }
  function zoomTo(c) {  // a bin's range, widened so its draws spread out
    var span = Math.max(c.hi - c.lo + 1, 8) * 1.5, mid = (c.lo + c.hi) / 2;
    view.lo = mid - span / 2; view.hi = mid + span / 2; draw();
  }

  function fit() {  // keep some of the events in sight, however far a drag or zoom goes
    var m = Math.max(n, 1), span = Math.min(view.hi - view.lo, m * 1.2);
    if (span >= m) view.lo = (m - 1) / 2 - span / 2;
    else view.lo = Math.min(Math.max(view.lo, -0.5 - span / 4), m - 0.5 - span * 3 / 4);
    view.hi = view.lo + span;
  }

  function draw() {
    fit();
    var dpr = window.devicePixelRatio || 1;
    W = chart.clientWidth; H = TOP + lanes * LANE_H + AXIS_H;
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr); canvas.style.height = H + "px";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    var l;
    for (l = 0; l < lanes; l++) {
      // Across processes each process is a band of lanes: shaded alike, its name over its first lane.
      var shade = bands ? D.laneProcess[l] : l, y0 = laneY(l), dy = 0;
      ctx.fillStyle = shade % 2 ? "#fafaf9" : "#f3f2f1"; ctx.fillRect(0, y0, W, LANE_H);
      ctx.textBaseline = "alphabetic";
      if (bands) {
        dy = 6;
        if (l > 0 && D.laneProcess[l - 1] !== D.laneProcess[l]) { ctx.fillStyle = "#a8a29e"; ctx.fillRect(0, y0, W, 1); }
        ctx.fillStyle = "#57534e"; ctx.font = "600 11px system-ui, sans-serif";
        ctx.fillText(D.processes[D.laneProcess[l]][1], 10, y0 + 15, LABEL_W - 16);
      }
      ctx.fillStyle = "#1c1917"; ctx.font = "600 13px system-ui, sans-serif";
      ctx.fillText(D.lanes[l], 10, y0 + 24 + dy);
      var sm = laneSummary[l], words = [];
      if (sm[1]) words.push(plural(sm[1], "seed"));
      if (sm[0]) words.push(plural(sm[0], "draw"));
      ctx.fillStyle = "#78716c"; ctx.font = "11px system-ui, sans-serif";
      ctx.fillText(words.join(" · ") || (sm[2] ? "" : "no events"), 10, y0 + 40 + dy, LABEL_W - 16);
      if (sm[2]) { ctx.fillStyle = ODD; ctx.fillText(sm[2].toLocaleString() + " unattributed", 10, y0 + 54 + dy, LABEL_W - 16); }
    }
    axis();
    ctx.save(); ctx.beginPath(); ctx.rect(LABEL_W - 7, TOP, plotW() + 14, lanes * LANE_H); ctx.clip();
    var w = Math.max(1, Math.min(7, 0.7 * plotW() / (view.hi - view.lo))), drawn = 0, bins = dense();
    ctx.globalAlpha = lit ? 0.13 : 1;
    if (bins) drawn += binned();  // seeds and unattributed moves keep their own marks, on top
    groupList.forEach(function (g) { if (!bins || g.kind !== 0) drawn += paint(g.list, g.kind, D.packages[g.pkg][1], w); });
    if (lit) {
      ctx.globalAlpha = 1;
      groupList.forEach(function (g) {
        var sub = g.list.filter(function (idx) { return lit[idx]; });
        if (sub.length) paint(sub, g.kind, D.packages[g.pkg][1], w);
      });
    }
    ctx.globalAlpha = 1;
    [pinned, hover].forEach(function (idx, j) {
      if (idx < 0) return;
      var x = xOf(idx), y = laneY(laneOf[idx]);
      ctx.strokeStyle = j ? "rgba(28,25,23,.45)" : "#1c1917"; ctx.lineWidth = 1;
      ctx.beginPath(); ctx.moveTo(Math.round(x) + 0.5, TOP); ctx.lineTo(Math.round(x) + 0.5, TOP + lanes * LANE_H); ctx.stroke();
      ctx.strokeStyle = "#e8590c"; ctx.lineWidth = 2; ctx.strokeRect(x - w / 2 - 4, y + 3, w + 8, LANE_H - 6);
    });
    ctx.restore();
    chart.dataset.rendered = String(drawn); chart.dataset.mode = bins ? "binned" : "marks";
    panel.style.height = Math.max(H, 320) + "px";
  }

  function axis() {
    var span = view.hi - view.lo, target = span / Math.max(plotW() / 90, 1);
    var step = Math.pow(10, Math.floor(Math.log10(Math.max(target, 1))));
    [1, 2, 5, 10].some(function (m) { if (step * m >= target) { step *= m; return true; } return false; });
    step = Math.max(1, step);
    var y = TOP + lanes * LANE_H;
    ctx.fillStyle = "#78716c"; ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "top"; ctx.textAlign = "center";
    ctx.fillText("event #", LABEL_W / 2, y + 8);
    for (var t = Math.ceil(Math.max(view.lo, 0) / step) * step; t <= view.hi; t += step) {
      var x = xOf(t);
      ctx.fillRect(Math.round(x), y, 1, 5);
      ctx.fillText(t.toLocaleString(), x, y + 8);
    }
    ctx.textAlign = "left";
  }

  function hit(mx, my) {
    var l = Math.floor((my - TOP) / LANE_H);
    if (l < 0 || l >= lanes || mx < LABEL_W - 8) return -1;
    var list = dense() ? oddLists[l] : laneLists[l]; if (!list.length) return -1;  // binned draws: hitCell
    var t = view.lo + (mx - LABEL_W) / plotW() * (view.hi - view.lo), k = first(list, t), best = -1, dist = 1e9;
    [k - 1, k].forEach(function (j) {
      if (j < 0 || j >= list.length) return;
      var d = Math.abs(xOf(list[j]) - mx); if (d < dist) { dist = d; best = list[j]; }
    });
    return dist <= 6 ? best : -1;
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag); if (cls) e.className = cls; if (text != null) e.textContent = text; return e;
  }
  function frameText(f) { return f[0] + ":" + f[1]; }
  function apiText(idx) {
    var site = D.sites[D.site[idx]], c = D.count[idx], kind = kindOf[idx];
    if (kind === 1) return site[2] + "(" + (D.detail[idx] == null ? "" : D.detail[idx]) + ")";
    if (kind === 3) return site[2] + "()";
    return site[2] + (kind === 0 && c != null ? " ×" + c.toLocaleString() : "");
  }
  function stackOf(idx) { return D.stacks[D.sites[D.site[idx]][3]].map(function (f) { return D.frames[f]; }); }

  function showTip(idx, mx, my) {
    if (idx < 0) { tip.hidden = true; return; }
    tip.textContent = "";
    tip.appendChild(el("div", "t-api", "#" + idx + "  " + apiText(idx)));
    var st = stackOf(idx);
    var at = kindOf[idx] === 2 ? D.detail[idx] : null;
    tip.appendChild(el("div", "t-at", st.length ? frameText(st[0]) + " in " + st[0][2] : at || KINDS[kindOf[idx]]));
    tip.hidden = false;
    var left = Math.min(mx + 14, W - tip.offsetWidth - 4), top = my + 16;
    tip.style.left = Math.max(left, 0) + "px"; tip.style.top = top + "px";
  }

  function showCellTip(c, mx, my) {
    tip.textContent = "";
    var site = D.sites[c.site], st = D.stacks[site[3]].map(function (f) { return D.frames[f]; });
    tip.appendChild(el("div", "t-api", plural(c.n, "draw") + "  " + site[2] + "  #" + c.lo + (c.hi > c.lo ? "–#" + c.hi : "")));
    tip.appendChild(el("div", "t-at", (st.length ? frameText(st[0]) + " in " + st[0][2] + " · " : "") + "click or scroll to zoom in"));
    tip.hidden = false;
    tip.style.left = Math.max(Math.min(mx + 14, W - tip.offsetWidth - 4), 0) + "px"; tip.style.top = (my + 16) + "px";
  }

  function showDetail(idx) {
    panel.textContent = "";
    if (idx < 0) { panel.appendChild(el("p", "placeholder", "Hover a mark to see the stack that made it; click to keep it here.")); return; }
    var site = D.sites[D.site[idx]], kind = kindOf[idx], pkg = D.packages[pkgOf[idx]];
    var head = el("div", "d-head"), sw = el("span", "swatch");
    sw.style.background = kind === 2 ? ODD : pkg[1];
    head.appendChild(sw); head.appendChild(el("span", null, "#" + idx + " · " + D.lanes[site[0]] + " · " + KINDS[kind]));
    head.appendChild(el("span", "d-pin", idx === pinned ? "pinned · Esc to clear" : "click to pin"));
    panel.appendChild(head);
    panel.appendChild(el("div", "d-api", apiText(idx)));
    var dl = el("dl");
    function row(k, v, cls) { dl.appendChild(el("dt", null, k)); dl.appendChild(el("dd", cls, v)); }
    if (kind !== 2) row("made by", pkg[0]);
    if (kind === 0) row("values", D.count[idx] == null ? "unknown (seen by the catch-all)" : D.count[idx].toLocaleString());
    if (kind === 1) row("seed", D.detail[idx] == null ? "none given" : D.detail[idx]);
    if (kind === 2) row("where", D.detail[idx] == null ? "" : D.detail[idx], "odd");
    if (kind === 3) row("seed", "none: made from OS entropy, so it draws other numbers every run", "odd");
    if (bands) row("process", D.processes[D.laneProcess[site[0]]][1]);
    row("thread", D.threads[D.thread.length ? D.thread[idx] : 0] || "");
    panel.appendChild(dl);
    var st = stackOf(idx), mine = -1;
    for (var j = 0; j < st.length; j++) { if (st[j][3]) { mine = j; break; } }
    panel.appendChild(el("h3", null, !st.length ? (kind === 2 ? "no stack: no recorded call made it" : "no stack recorded")
                                          : kind === 2 ? "where it was noticed" : "stack, innermost first"));
    var ol = el("ol", "stack"), folded = null;
    st.forEach(function (f, j) {
      var li = el("li", j === mine ? "mine" : (f[3] ? "user" : ""));
      li.title = f[4] + ":" + f[1];
      var fn = el("span", "fn", f[2]);
      if (j === mine) fn.appendChild(el("span", "badge", "your code"));
      li.appendChild(fn);
      li.appendChild(el("span", "loc", frameText(f)));
      // Library frames between the calling line and the user's line fold into one row.
      if (j > 0 && j < mine && mine > 2) {
        if (!folded) {
          folded = el("li", "fold", "… " + (mine - 1) + " library frames");
          folded.title = "show them";
          ol.appendChild(folded);
          folded.addEventListener("click", function () {
            ol.querySelectorAll("li.hidden").forEach(function (h) { h.classList.remove("hidden"); });
            this.remove();
          });
        }
        li.classList.add("hidden");
      }
      ol.appendChild(li);
    });
    panel.appendChild(ol);
    var own = ol.querySelector(".mine");  // keep the user's line in sight in a deep stack
    if (own && own.offsetTop + own.offsetHeight > panel.clientHeight) panel.scrollTop = own.offsetTop - panel.clientHeight / 2;
    else panel.scrollTop = 0;
  }

  function setLit(key, pick) {
    if (litKey === key) { key = null; }
    litKey = key; lit = null;
    if (key !== null) { lit = new Uint8Array(n); for (var k = 0; k < n; k++) if (pick(k)) lit[k] = 1; }
    document.querySelectorAll("tr.on, .pkg.on, li.on").forEach(function (e) { e.classList.remove("on"); });
    return key !== null;
  }
  function reveal(idx) {
    if (idx < 0) return;
    var span = view.hi - view.lo;
    if (idx < view.lo || idx > view.hi) { view.lo = idx - span / 2; view.hi = idx + span / 2; }
  }
  function pin(idx) {
    pinned = idx; reveal(idx); showDetail(idx); draw();
    try { history.replaceState(null, "", idx < 0 ? location.pathname : "#event=" + idx); } catch (e) { /* a sandboxed frame */ }
  }

  document.querySelectorAll("#sites tbody tr").forEach(function (tr) {
    tr.addEventListener("click", function () {
      var r = Number(tr.dataset.row);
      if (setLit("row" + r, function (k) { return rowOf[k] === r; })) tr.classList.add("on");
      draw();
    });
  });
  document.querySelectorAll("#others tbody tr").forEach(function (tr) {
    tr.addEventListener("click", function () {
      var idx = Number(tr.dataset.index); if (idx < n) { pin(idx); chart.scrollIntoView({ block: "center" }); }
    });
  });
  document.querySelectorAll("#processes tbody tr").forEach(function (tr) {
    tr.addEventListener("click", function () {
      var pid = Number(tr.dataset.pid), b = -1;
      D.processes.forEach(function (p, j) { if (p[0] === pid) b = j; });
      if (setLit("pid" + pid, function (k) { return b >= 0 && D.laneProcess[laneOf[k]] === b; })) tr.classList.add("on");
      draw();
    });
  });
  document.querySelectorAll("#findings li").forEach(function (li) {
    li.addEventListener("click", function () {
      var f = Number(li.dataset.finding), marks = D.findings[f] || [], set = {};
      marks.forEach(function (idx) { set[idx] = 1; });
      if (setLit("finding" + f, function (k) { return set[k] === 1; })) {
        li.classList.add("on");
        if (marks.length) { pin(marks[0]); chart.scrollIntoView({ block: "center" }); return; }
      }
      draw();
    });
  });
  document.querySelectorAll(".legend .pkg").forEach(function (b) {
    b.addEventListener("click", function () {
      var p = Number(b.dataset.package);
      if (setLit("pkg" + p, function (k) { return pkgOf[k] === p && kindOf[k] !== 2; })) b.classList.add("on");
      draw();
    });
  });

  function local(ev) { var r = canvas.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; }
  canvas.addEventListener("mousemove", function (ev) {
    var p = local(ev);
    if (drag) {
      var dx = (p[0] - drag.x) / plotW() * (drag.hi - drag.lo);
      if (Math.abs(p[0] - drag.x) > 3) { drag.moved = true; chart.classList.add("dragging"); }
      view.lo = drag.lo - dx; view.hi = drag.hi - dx; draw(); return;
    }
    var idx = hit(p[0], p[1]), cell = idx < 0 && dense() ? hitCell(p[0], p[1]) : null;
    if (idx !== hover) { hover = idx; if (pinned < 0) showDetail(idx); draw(); }
    if (cell) showCellTip(cell, p[0], p[1]); else showTip(idx, p[0], p[1]);
  });
  canvas.addEventListener("mouseleave", function () { hover = -1; tip.hidden = true; if (pinned < 0) showDetail(-1); draw(); });
  canvas.addEventListener("mousedown", function (ev) { var p = local(ev); drag = { x: p[0], lo: view.lo, hi: view.hi, moved: false }; });
  window.addEventListener("mouseup", function (ev) {
    if (!drag) return;
    var moved = drag.moved; drag = null; chart.classList.remove("dragging");
    if (!moved && ev.target === canvas) {
      var p = local(ev), idx = hit(p[0], p[1]), cell = idx < 0 && dense() ? hitCell(p[0], p[1]) : null;
      if (cell) { tip.hidden = true; zoomTo(cell); } else pin(idx === pinned ? -1 : idx);
    }
  });
  canvas.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var p = local(ev), at = view.lo + (p[0] - LABEL_W) / plotW() * (view.hi - view.lo);
    var f = ev.deltaY > 0 ? 1.25 : 0.8, span = Math.max((view.hi - view.lo) * f, 8);
    var frac = (at - view.lo) / (view.hi - view.lo);
    view.lo = at - frac * span; view.hi = view.lo + span; draw();
  }, { passive: false });
  function reset() { view.lo = -0.5; view.hi = Math.max(n, 1) - 0.5; draw(); }
  canvas.addEventListener("dblclick", reset);
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape") { setLit(null, null); view.lo = -0.5; view.hi = Math.max(n, 1) - 0.5; pin(-1); showDetail(hover); }
    else if ((ev.key === "ArrowRight" || ev.key === "ArrowLeft") && n) {
      var cur = pinned < 0 ? (ev.key === "ArrowRight" ? -1 : n) : pinned;
      var next = Math.min(Math.max(cur + (ev.key === "ArrowRight" ? 1 : -1), 0), n - 1);
      ev.preventDefault(); pin(next);
    }
  });
  window.addEventListener("resize", draw);
  var linked = /^#event=(\d+)$/.exec(location.hash);  // a link to one event opens with it pinned
  draw();
  if (linked && Number(linked[1]) < n) { pinned = Number(linked[1]); showDetail(pinned); draw(); }
})();
"""

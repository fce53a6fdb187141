// capeval per-item explorer (capeval/explorer/page.py writes it into the page; docs/explorer.md).
// Every string of the data goes into the page as text (textContent), never as markup.
(function () {
  "use strict";
  var t0 = performance.now();
  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  var meta = JSON.parse($("ce-meta").textContent);
  var rows = JSON.parse($("ce-items").textContent);
  var cols = meta.columns || [];
  var systems = meta.systems || ["candidate"];
  var images = !!meta.images;
  var N = rows.length;
  var RH = images ? 72 : 64;
  function fmt(v) {
    if (v === null || v === undefined) return "–";
    var a = Math.abs(v);
    return a !== 0 && a < 0.001 ? v.toExponential(2) : a >= 1000 ? v.toFixed(1) : v.toFixed(4);
  }
  // a thumbnail is a data: image of ours or a relative file path written by capeval; nothing else is used
  function safeThumb(u) {
    return typeof u === "string" && (/^data:image\/(jpeg|png);base64,[A-Za-z0-9+\/=]+$/.test(u) ||
      (/^[A-Za-z0-9%._~-]+(\/[A-Za-z0-9%._~-]+)*$/.test(u) && u.split("/").indexOf("..") < 0)) ? u : null;
  }

  // ----- header: title, notes, the metrics' summary -----
  document.title = meta.title || "capeval explorer";
  $("ce-title").textContent = meta.title || "capeval explorer";
  var notes = $("ce-notes");
  (meta.notes || []).forEach(function (n) { notes.appendChild(el("p", "note", n)); });
  var sum = $("ce-summary");
  if (meta.summary && meta.summary.length) {
    var keys = meta.summary_columns || ["metric", "system", "n", "skipped", "signature"];
    var tr = el("tr");
    keys.forEach(function (k) { tr.appendChild(el("th", null, k)); });
    sum.appendChild(tr);
    meta.summary.forEach(function (s) {
      var r = el("tr", s.significant ? "sigrow" : null);
      keys.forEach(function (k) {
        var v = s[k];
        if (k === "signature") { r.appendChild(el("td", "sig", v)); return; }
        if (k === "counters") {
          r.appendChild(el("td", "note", Object.keys(v || {}).map(function (c) {
            var x = v[c];
            return c + "=" + (typeof x === "number" && !Number.isInteger(x) ? +x.toPrecision(6) : x);
          }).join(", ")));
          return;
        }
        r.appendChild(el("td", typeof v === "number" ? "num" : null, typeof v === "number" && k !== "n" && k !== "skipped" ? fmt(v) : v));
      });
      sum.appendChild(r);
    });
  }

  // ----- the table: a fixed header and rows rendered on demand -----
  // fields: id, thumbnail, one candidate per system, references, one per metric column
  var fields = [{ label: "id", kind: "id" }];
  if (images) fields.push({ label: "image", kind: "thumb" });
  systems.forEach(function (s, j) { fields.push({ label: systems.length > 1 ? s : "candidate", kind: "cand", sys: j }); });
  var hasRefs = rows.some(function (r) { return r[2] && r[2].length; });
  if (hasRefs) fields.push({ label: "references", kind: "refs" });
  cols.forEach(function (c, j) { fields.push({ label: c.label, kind: "score", col: j, diff: !!c.diff }); });
  var template = fields.map(function (f) {
    return f.kind === "id" ? "minmax(6em,9em)" : f.kind === "thumb" ? "96px" : f.kind === "cand" ? "minmax(14em,2fr)" :
      f.kind === "refs" ? "minmax(14em,2fr)" : "minmax(6.5em,7.5em)";
  }).join(" ");
  var head = $("ce-head"), body = $("ce-body"), view = $("ce-view");
  head.style.gridTemplateColumns = template;
  fields.forEach(function (f, k) {
    var h = el("div", null, f.label);
    h.title = f.kind === "score" ? (f.diff ? "click: sort by |difference|, again: by difference" : "click to sort") :
      f.kind === "id" ? "click to sort by id" : "";
    h.setAttribute("data-field", String(k));
    h.setAttribute("role", "columnheader");
    if (f.kind === "id" || f.kind === "score") h.addEventListener("click", function () { sortBy(k); });
    head.appendChild(h);
  });

  var order = new Int32Array(N);
  for (var i = 0; i < N; i++) order[i] = i;
  var shown = order; // indices of rows after filter and sort
  var sortField = -1, sortMode = 0; // mode: 1 descending, 2 ascending, 3 |x| descending
  var selected = -1;

  function value(r, f) {
    var v = rows[r][4][f.col];
    return v === null || v === undefined ? null : v;
  }
  function sortBy(k) {
    var f = fields[k];
    if (sortField !== k) { sortField = k; sortMode = f.diff ? 3 : f.kind === "id" ? 2 : 1; }
    else if (f.diff) { sortMode = sortMode === 3 ? 1 : sortMode === 1 ? 2 : 3; }
    else { sortMode = sortMode === 1 ? 2 : 1; }
    applySort();
    render(true);
  }
  function applySort() {
    if (sortField < 0) return;
    var f = fields[sortField], arr = Array.prototype.slice.call(shown);
    if (f.kind === "id") {
      arr.sort(function (a, b) { var x = rows[a][0], y = rows[b][0]; return x < y ? -1 : x > y ? 1 : a - b; });
      if (sortMode === 1) arr.reverse();
    } else {
      var key = new Float64Array(N);
      arr.forEach(function (r) { var v = value(r, f); key[r] = v === null ? NaN : sortMode === 3 ? -Math.abs(v) : sortMode === 1 ? -v : v; });
      arr.sort(function (a, b) {
        var x = key[a], y = key[b];
        if (x !== x) return y !== y ? a - b : 1;
        if (y !== y) return -1;
        return x - y || a - b;
      });
    }
    shown = Int32Array.from(arr);
    var hs = head.children;
    for (var j = 0; j < hs.length; j++) {
      hs[j].classList.toggle("sorted", j === sortField);
      hs[j].setAttribute("aria-sort", j !== sortField ? "none" : sortMode === 2 ? "ascending" : "descending");
      hs[j].textContent = fields[j].label + (j !== sortField ? "" : sortMode === 2 ? " ▲" : sortMode === 3 ? " |▼|" : " ▼");
    }
  }

  // words to mark (CHAIR/AMBER/ALOHa "hallucinated"): a word, its plural (s/es) or a two-word phrase
  var WORD = /([\p{L}\p{N}]+)/u;
  function appendMarked(parent, text, words) {
    text = String(text);
    if (!words || !words.length) { parent.appendChild(document.createTextNode(text)); return; }
    var set = new Set(words.map(function (w) { return String(w).toLowerCase(); }));
    var parts = text.split(WORD); // even: between words, odd: words
    var buf = "";
    function flush() { if (buf) { parent.appendChild(document.createTextNode(buf)); buf = ""; } }
    function hit(w) { w = w.toLowerCase(); return set.has(w) || (w.length > 2 && set.has(w.slice(0, -1)) && w.slice(-1) === "s") || (w.length > 3 && w.slice(-2) === "es" && set.has(w.slice(0, -2))); }
    for (var p = 0; p < parts.length; p++) {
      if (p % 2 === 0) { buf += parts[p]; continue; }
      if (p + 2 < parts.length && /^\s+$/.test(parts[p + 1]) && hit(parts[p] + " " + parts[p + 2])) {
        flush(); parent.appendChild(el("mark", null, parts[p] + parts[p + 1] + parts[p + 2])); p += 2; continue;
      }
      if (hit(parts[p])) { flush(); parent.appendChild(el("mark", null, parts[p])); } else buf += parts[p];
    }
    flush();
  }

  function cell(r, f) {
    var row = rows[r], c;
    if (f.kind === "id") return el("div", "id", row[0]);
    if (f.kind === "thumb") {
      c = el("div", "th");
      var u = safeThumb(row[3]);
      if (u) { var im = el("img"); im.alt = ""; im.src = u; c.appendChild(im); }
      return c;
    }
    if (f.kind === "cand") {
      c = el("div", "cand");
      appendMarked(c, row[1][f.sys] === null || row[1][f.sys] === undefined ? "" : row[1][f.sys], row[6] && row[6][f.sys]);
      return c;
    }
    if (f.kind === "refs") return el("div", "refs", (row[2] || []).join(" · "));
    var v = value(r, f);
    c = el("div", "num" + (v === null ? " na" : f.diff ? (v < 0 ? " neg" : v > 0 ? " pos" : "") : ""),
      v === null ? "–" : (f.diff && v > 0 ? "+" : "") + fmt(v));
    return c;
  }

  var drawn = { a: -1, b: -1 };
  function render(force) {
    body.style.height = (shown.length * RH) + "px";
    var top = Math.max(0, view.scrollTop - head.offsetHeight);
    var a = Math.max(0, Math.floor(top / RH) - 5);
    var b = Math.min(shown.length, Math.ceil((top + view.clientHeight) / RH) + 5);
    if (!force && a === drawn.a && b === drawn.b) return;
    drawn = { a: a, b: b };
    var frag = document.createDocumentFragment();
    for (var k = a; k < b; k++) {
      var r = shown[k], div = el("div", "ce-row" + (r === selected ? " sel" : ""));
      div.style.gridTemplateColumns = template;
      div.style.top = (k * RH) + "px";
      div.style.height = RH + "px";
      div.setAttribute("data-row", String(r));
      div.setAttribute("data-id", rows[r][0]);
      for (var j = 0; j < fields.length; j++) div.appendChild(cell(r, fields[j]));
      frag.appendChild(div);
    }
    body.replaceChildren(frag);
    $("ce-status").textContent = shown.length + " of " + N + " items" + (shown.length ? ", rows " + (a + 1) + "–" + b : "");
  }
  var pending = false;
  view.addEventListener("scroll", function () {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; render(false); });
  });
  window.addEventListener("resize", function () { render(true); drawScatter(); });
  body.addEventListener("click", function (ev) {
    var t = ev.target.closest(".ce-row");
    if (t) select(+t.getAttribute("data-row"), false);
  });

  // ----- the item's whole record below the table -----
  function select(r, scroll) {
    selected = r;
    if (scroll) {
      var k = Array.prototype.indexOf.call(shown, r);
      if (k < 0) { $("ce-q").value = ""; filter(""); k = Array.prototype.indexOf.call(shown, r); }
      view.scrollTop = Math.max(0, k * RH - view.clientHeight / 3);
    }
    render(true);
    detail(r);
    drawScatter();
  }
  function detail(r) {
    var d = $("ce-detail"), row = rows[r];
    d.replaceChildren();
    d.hidden = false;
    d.appendChild(el("h2", null, "item " + row[0]));
    var u = safeThumb(row[3]);
    if (u) { var im = el("img"); im.alt = ""; im.src = u; d.appendChild(im); }
    systems.forEach(function (s, j) {
      d.appendChild(el("div", "sys", systems.length > 1 ? s : "candidate"));
      var c = el("div", "cand");
      appendMarked(c, row[1][j] === null || row[1][j] === undefined ? "" : row[1][j], row[6] && row[6][j]);
      d.appendChild(c);
      if (row[6] && row[6][j] && row[6][j].length) d.appendChild(el("div", "note", "marked (hallucinated): " + row[6][j].join(", ")));
    });
    if (row[2] && row[2].length) {
      d.appendChild(el("div", "sys", "references"));
      var ol = el("ol");
      row[2].forEach(function (t) { ol.appendChild(el("li", null, t)); });
      d.appendChild(ol);
    }
    var ex = safeThumb(row[7]);
    if (ex) {
      d.appendChild(el("div", "sys", "explanation (--explain)"));
      var xi = el("img", "explain"); xi.alt = "explanation of item " + row[0]; xi.src = ex; d.appendChild(xi);
    }
    var t = el("table", "sum"), tr = el("tr");
    tr.appendChild(el("th", null, "metric")); tr.appendChild(el("th", null, "score"));
    t.appendChild(tr);
    cols.forEach(function (c, j) {
      var x = el("tr"); x.appendChild(el("td", null, c.label));
      var v = row[4][j];
      x.appendChild(el("td", "num", v === null ? "–" : (c.diff && v > 0 ? "+" : "") + fmt(v))); t.appendChild(x);
    });
    d.appendChild(t);
    if (row[5]) {
      Object.keys(row[5]).forEach(function (k) {
        d.appendChild(el("div", "sys", k));
        var txt = JSON.stringify(row[5][k]);
        d.appendChild(el("pre", null, txt.length > 120 ? JSON.stringify(row[5][k], null, 1) : txt));
      });
    }
  }

  // ----- search over ids and texts -----
  var hay = null;
  function filter(q) {
    q = q.trim().toLowerCase();
    if (!q) { shown = order; }
    else {
      if (!hay) hay = rows.map(function (r) { return (r[0] + "\u0001" + r[1].join("\u0001") + "\u0001" + (r[2] || []).join("\u0001")).toLowerCase(); });
      var out = [];
      for (var i = 0; i < N; i++) if (hay[i].indexOf(q) >= 0) out.push(i);
      shown = Int32Array.from(out);
    }
    applySort();
    view.scrollTop = 0;
    render(true);
    drawScatter();
  }
  var timer = 0;
  $("ce-q").addEventListener("input", function (ev) {
    clearTimeout(timer);
    var q = ev.target.value;
    timer = setTimeout(function () { filter(q); }, 120);
  });

  // ----- histograms (all items) and the scatter of two columns (the items shown) -----
  function canvas(w, h) {
    var c = el("canvas"), s = window.devicePixelRatio || 1;
    c.width = w * s; c.height = h * s; c.style.width = w + "px"; c.style.height = h + "px";
    var g = c.getContext("2d"); g.scale(s, s);
    return [c, g];
  }
  function range(j) {
    var lo = Infinity, hi = -Infinity, n = 0;
    for (var i = 0; i < N; i++) { var v = rows[i][4][j]; if (v !== null) { n++; if (v < lo) lo = v; if (v > hi) hi = v; } }
    return { lo: lo, hi: hi, n: n };
  }
  var ranges = cols.map(function (c, j) { return range(j); });
  cols.forEach(function (c, j) {
    var W = 220, H = 86, B = 30, rg = ranges[j], box = el("div", "hist");
    box.appendChild(el("div", "lab", c.label + " (" + rg.n + " items)"));
    var cg = canvas(W, H), g = cg[1];
    if (rg.n) {
      var bins = new Array(B).fill(0), span = rg.hi - rg.lo || 1;
      for (var i = 0; i < N; i++) { var v = rows[i][4][j]; if (v !== null) bins[Math.min(B - 1, Math.floor((v - rg.lo) / span * B))]++; }
      var mx = Math.max.apply(null, bins);
      g.fillStyle = "#5b8def";
      for (var b = 0; b < B; b++) { var h = bins[b] / mx * (H - 18); g.fillRect(4 + b * (W - 8) / B, H - 14 - h, (W - 8) / B - 1, h); }
      g.fillStyle = "#444"; g.font = "10px sans-serif";
      g.fillText(fmt(rg.lo), 4, H - 3);
      var hiText = fmt(rg.hi); g.fillText(hiText, W - 4 - g.measureText(hiText).width, H - 3);
    }
    box.appendChild(cg[0]);
    $("ce-hists").appendChild(box);
  });
  var sx = $("ce-x"), sy = $("ce-y");
  cols.forEach(function (c, j) {
    sx.appendChild(el("option", null, c.label)).value = String(j);
    sy.appendChild(el("option", null, c.label)).value = String(j);
  });
  if (cols.length > 1) sy.value = "1";
  sx.addEventListener("change", drawScatter); sy.addEventListener("change", drawScatter);
  var SW = 460, SH = 340, PAD = 36;
  var sc = canvas(SW, SH), sg = sc[1], pts = null;
  sc[0].id = "ce-scatter";
  $("ce-scatterbox").appendChild(sc[0]);
  if (!cols.length) $("ce-plots").hidden = true;
  function drawScatter() {
    if (!cols.length) return;
    var jx = +sx.value, jy = +sy.value, rx = ranges[jx], ry = ranges[jy];
    sg.clearRect(0, 0, SW, SH);
    sg.strokeStyle = "#999"; sg.strokeRect(PAD, 8, SW - PAD - 8, SH - PAD - 8);
    sg.fillStyle = "#444"; sg.font = "10px sans-serif";
    sg.fillText(cols[jx].label, PAD, SH - 6);
    sg.save(); sg.translate(10, (SH - PAD) / 2 + 20); sg.rotate(-Math.PI / 2); sg.fillText(cols[jy].label, 0, 0); sg.restore();
    if (!rx.n || !ry.n) { pts = null; return; }
    sg.fillText(fmt(rx.lo), PAD, SH - PAD + 12); var t = fmt(rx.hi); sg.fillText(t, SW - 8 - sg.measureText(t).width, SH - PAD + 12);
    sg.fillText(fmt(ry.hi), 2, 16); sg.fillText(fmt(ry.lo), 2, SH - PAD);
    var wx = (SW - PAD - 16) / ((rx.hi - rx.lo) || 1), wy = (SH - PAD - 24) / ((ry.hi - ry.lo) || 1);
    pts = { x: new Float32Array(shown.length), y: new Float32Array(shown.length), r: new Int32Array(shown.length), n: 0 };
    sg.fillStyle = shown.length > 5000 ? "rgba(40,90,200,0.25)" : "rgba(40,90,200,0.6)";
    var sel = null;
    for (var k = 0; k < shown.length; k++) {
      var r = shown[k], vx = rows[r][4][jx], vy = rows[r][4][jy];
      if (vx === null || vy === null) continue;
      // one value only on an axis: its points in the middle of that axis
      var px = rx.hi === rx.lo ? (PAD + SW - 8) / 2 : PAD + 4 + (vx - rx.lo) * wx;
      var py = ry.hi === ry.lo ? (SH - PAD + 8) / 2 : SH - PAD - 4 - (vy - ry.lo) * wy;
      pts.x[pts.n] = px; pts.y[pts.n] = py; pts.r[pts.n] = r; pts.n++;
      if (r === selected) sel = [px, py];
      sg.fillRect(px - 1.5, py - 1.5, 3, 3);
    }
    if (sel) { sg.strokeStyle = "#d93025"; sg.lineWidth = 2; sg.strokeRect(sel[0] - 5, sel[1] - 5, 10, 10); sg.lineWidth = 1; }
  }
  sc[0].addEventListener("click", function (ev) {
    if (!pts) return;
    var b = sc[0].getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top, best = -1, bd = 64;
    for (var k = 0; k < pts.n; k++) { var dx = pts.x[k] - x, dy = pts.y[k] - y, d = dx * dx + dy * dy; if (d < bd) { bd = d; best = k; } }
    if (best >= 0) select(pts.r[best], true);
  });

  if (typeof meta.sort === "number") { var k0 = fields.findIndex(function (f) { return f.kind === "score" && f.col === meta.sort; }); if (k0 >= 0) { sortField = k0; sortMode = fields[k0].diff ? 3 : 1; applySort(); } }
  render(true);
  drawScatter();
  // for tests and scripts: how long opening took, and where an item's point is on the scatter
  window.capevalExplorer = {
    openMs: performance.now() - t0, readyMs: performance.now(), rows: N,
    pointOf: function (id) {
      if (!pts) return null;
      for (var k = 0; k < pts.n; k++) if (rows[pts.r[k]][0] === id) return [pts.x[k], pts.y[k]];
      return null;
    }
  };
  document.body.setAttribute("data-ready", "1");
})();
